#include "core/engine/ProcessGroups.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef STAGESCOPE_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/engine/QuietC10dLogs.h"

namespace stagescope::engine {
namespace {

// Gloo's TCP transport runs one event-loop thread per device.  On each readable socket that
// thread only try-locks the pair, and on failure goes back to a level-triggered epoll_wait
// that returns at once: it spins for as long as another thread holds the pair's lock.  The
// rank's main thread holds it inside every send and recv, around a writev that wakes the
// peer's loop thread; with more runnable threads than cores that wake-up preempts the main
// thread right there, lock held, and this rank's loop thread spins on its core until the
// main thread runs again (measured: 97 % of its epoll_waits ended in a failed try-lock, and
// the spinning loop threads took ~35 % of all CPU of a pp4 run on 2 cores).  A SCHED_BATCH
// thread never preempts on wake-up and otherwise keeps its fair share, so the loop thread is
// created under it (threads inherit the creator's policy): what it wakes no longer preempts
// a lock holder, and it does not starve on a busy machine as SCHED_IDLE or a high nice value
// did.  STAGESCOPE_GLOO_LOOP_SCHED=normal creates it under the caller's policy (benchmark).
std::shared_ptr<::gloo::transport::Device> createGlooDevice(const GlooAddress& address) {
  auto create = [&] {
    return address.source == GlooAddress::Source::Interface
               ? c10d::ProcessGroupGloo::createDeviceForInterface(address.value)
               : c10d::ProcessGroupGloo::createDeviceForHostname(address.value);
  };
  const char* sched = std::getenv("STAGESCOPE_GLOO_LOOP_SCHED");
  if (sched != nullptr && std::string(sched) == "normal") return create();
  std::shared_ptr<::gloo::transport::Device> device;
  std::exception_ptr error;
  std::thread([&] {
    sched_param none{};
    // Best effort: if the policy cannot be set, the loop thread runs as before.
    (void)sched_setscheduler(0, SCHED_BATCH, &none);
    try {
      device = create();
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
  return device;
}

std::string joinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "-" : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

int Group::localRank(int globalRank) const {
  auto it = std::find(ranks.begin(), ranks.end(), globalRank);
  if (it == ranks.end()) {
    throw std::runtime_error("rank " + std::to_string(globalRank) + " is not in group " + name);
  }
  return static_cast<int>(it - ranks.begin());
}

ProcessGroups::ProcessGroups(c10::intrusive_ptr<c10d::Store> store, int rank, int worldSize,
                             BackendKind backend, std::chrono::milliseconds timeout)
    : store_(std::move(store)),
      rank_(rank),
      worldSize_(worldSize),
      backend_(backend),
      timeout_(timeout) {
  const char* host = std::getenv("STAGESCOPE_GLOO_HOST");
  gloo_.source = GlooAddress::Source::Override;
  gloo_.value = gloo_.address = host != nullptr && *host != '\0' ? host : "127.0.0.1";
  gloo_.loopback = isLoopbackAddress(gloo_.value);
}

namespace {
// The least time a group's members get to meet when it is created (see makeBackend).
constexpr std::chrono::milliseconds kGroupSetupTimeout{60'000};
}  // namespace

std::shared_ptr<Group> ProcessGroups::get(std::vector<int> ranks, const std::string& purpose) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return nullptr;
  if (auto it = groups_.find(ranks); it != groups_.end()) return it->second;
  auto group = std::make_shared<Group>();
  group->name = purpose + "/" + joinRanks(ranks);
  group->ranks = ranks;
  if (ranks.size() > 1) {
    const auto started = std::chrono::steady_clock::now();
    try {
      group->backend = makeBackend(ranks, group->localRank(rank_));
    } catch (const c10::DistStoreError& e) {
      // The members meet through the store; the store's own text names an internal key
      // ("wait timeout after 60000ms, keys: /g/1-2//0/1"): say which group, how long this
      // rank really waited (the store's client waits timeout_seconds, which may be far less
      // than the group's set-up allowance), and what it means.  A timeout is a wait that ran
      // out (exit as a timeout: a consequence of the member that did not come); any other store
      // error means the store or a member went away.
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.3g", seconds);
      const std::string what = e.what_without_backtrace();
      const std::string head = "rank " + std::to_string(rank_) + ": creating the " + purpose +
                               " process group of ranks " + joinRanks(ranks) + ": ";
      if (what.find("timeout") != std::string::npos || what.find("Timeout") != std::string::npos)
        throw StoreTimeout(head + "not every member joined within " + waited +
                           " s (a member did not start, or stopped before creating its groups)");
      throw std::runtime_error(
          head + "the store failed after " + waited +
          " s (a member or the launcher went away: " + what.substr(0, what.find('\n')) + ")");
    }
  }
  groups_.emplace(ranks, group);
  return group;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroups::makeBackend(const std::vector<int>& ranks,
                                                             int localRank) {
  // The prefix depends only on the rank list, so identical lists on every member meet in
  // the same key space whatever purpose asked first.
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("g/" + joinRanks(ranks) + "/", store_);
  const int size = static_cast<int>(ranks.size());
  if (backend_ == BackendKind::Nccl) {
#ifdef STAGESCOPE_HAVE_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout_;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, localRank, size, opts);
#else
    throw std::runtime_error(
        "backend = \"nccl\": this build has no NCCL (configure with the "
        "'cuda' preset) — use backend = \"gloo\"");
#endif
  }
  // Creating the group is a rendezvous of its members through the store (Gloo's full-mesh
  // connect, bounded by the group's timeout): a member seconds late under load is not a hang
  // of the schedule, and a dead one is named by the liveness heartbeat (or stopped by the
  // launcher) long before. So the set-up gets at least kGroupSetupTimeout; the group's
  // operations then get the configured timeout (a 3 s timeout_seconds failed group set-up
  // under a loaded machine: "wait timeout after 3000ms, keys: /g/1-2//0/1").
  auto opts = c10d::ProcessGroupGloo::Options::create(std::max(timeout_, kGroupSetupTimeout));
  opts->devices.push_back(createGlooDevice(gloo_));
  opts->threads = 1;  // P2P and collectives of one group are issued from one thread
  std::vector<uint64_t> global(ranks.begin(), ranks.end());
  opts->global_ranks_in_group = global;
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, localRank, size, opts);
  group->setTimeout(timeout_);
  return group;
}

c10::intrusive_ptr<c10d::Store> connectStore(const std::string& host, int port, bool isServer,
                                             int worldSize, std::chrono::milliseconds timeout) {
  (void)worldSize;
  const QuietC10dLogs quiet;
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = isServer;
  o.numWorkers = std::nullopt;
  o.waitWorkers = false;
  o.timeout = timeout;
  // TCPStore's constructor has no bound of its own once the TCP connection is accepted: a
  // port held by a program that is not a TCPStore (it accepts and never answers) blocks the
  // handshake for minutes.  So the constructor runs on a helper thread and we wait at most
  // `timeout` (plus a second for the thread itself); past that, the thread is left blocked
  // (detached: it owns its state) and the rank stops with the diagnosis.
  auto result = std::make_shared<std::promise<c10::intrusive_ptr<c10d::Store>>>();
  auto future = result->get_future();
  std::thread([host, o, result] {
    try {
      result->set_value(c10::make_intrusive<c10d::TCPStore>(host, o));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(timeout.count()) / 1000.0);
  const std::string where = host + ":" + std::to_string(port);
  if (future.wait_for(timeout + std::chrono::seconds(1)) != std::future_status::ready) {
    throw StoreTimeout(
        "rendezvous: " + where + " did not answer as a c10d TCPStore within " +
        "timeout_seconds = " + seconds +
        " (nothing there answered as a store: rank 0, which hosts it, has not started or is not "
        "reachable at that address, or another program holds MASTER_PORT)");
  }
  try {
    return future.get();
  } catch (const c10::Error& e) {
    std::string m = e.what_without_backtrace();
    m = m.substr(0, m.find('\n'));
    throw StoreTimeout("rendezvous: " +
                       (isServer ? "cannot host the store at " + where + ": "
                                 : "cannot reach the store at " + where +
                                       " within timeout_seconds = " + seconds + ": ") +
                       m);
  }
}

}  // namespace stagescope::engine
