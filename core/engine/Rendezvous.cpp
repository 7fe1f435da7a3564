#include "core/engine/Rendezvous.h"

#include "core/engine/Clock.h"
#include "core/engine/QuietC10dLogs.h"
#include "core/events/Printable.h"

#include <c10/util/Exception.h>

#include <charconv>

#include <cstdint>
#include <string>

#include <thread>
#include <vector>

namespace stagescope::engine {
namespace {

const std::string kIdentityPrefix = "stagescope/identity/";
const std::string kVerdictKey = kIdentityPrefix + "verdict";
const std::string kSeenKey = kIdentityPrefix + "verdict_seen";
const std::string kOk = "ok";
const std::string kNetworkPrefix = "network: ";

// Polls counter `key` (last read as `value`) until it reaches `target` or `timeout` passes.
void waitUntilCount(c10d::Store& store, const std::string& key, int64_t value, int64_t target,
                    std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (value < target && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    value = store.add(key, 0);
  }
}

std::string identityKey(int rank) {
  return kIdentityPrefix + std::to_string(rank);
}

std::string secondsText(std::chrono::milliseconds t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

// The CLOCK_MONOTONIC time in ns that rank 0 stored under `key`: a whole decimal number, as
// rank 0 writes it.  Anything else (a hostile or corrupted store) is a RendezvousError
// (Network) quoting the value, never an uncaught std::stoll exception.
int64_t storedNs(c10d::Store& store, const std::string& key, const std::string& phase) {
  const std::string text = store.get_to_str(key);
  int64_t ns = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, ns);
  if (text.empty() || ec != std::errc() || at != end) {
    throw RendezvousError(
        RendezvousError::Kind::Network,
        events::printableLine("clock alignment (" + phase + "): the store holds '" +
                              text.substr(0, 64) + (text.size() > 64 ? "…" : "") + "' under " +
                              key + ": expected rank 0's time in ns (a whole number)"));
  }
  return ns;
}

// Rank 0's verdict: "ok", or the one-line reason to stop.
std::string judge(c10d::Store& store, int worldSize, std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < worldSize; ++r) keys.push_back(identityKey(r));
  try {
    store.wait(keys, timeout);
  } catch (const c10::Error&) {
    std::vector<int> missing;
    for (int r = 0; r < worldSize; ++r)
      if (!store.check({identityKey(r)})) missing.push_back(r);
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 16; ++i)
      list += (i ? "," : "") + std::to_string(missing[i]);
    if (missing.size() > 16) list += ",…";
    return "rendezvous: rank(s) " + list + " of " + std::to_string(worldSize) +
           " did not arrive within timeout_seconds = " + secondsText(timeout) +
           " (not started, or cannot reach the store)";
  }
  std::vector<RunIdentity> all;
  for (const auto& bytes : store.multiGet(keys))
    all.push_back(decodeIdentity(std::string(bytes.begin(), bytes.end())));
  const std::string mismatch = identityMismatch(all);
  if (!mismatch.empty()) return mismatch;
  const std::string address = addressProblem(all);
  return address.empty() ? kOk : kNetworkPrefix + address;
}

}  // namespace

void verifyRunIdentity(c10d::Store& store, int rank, int worldSize, const RunIdentity& mine,
                       std::chrono::milliseconds timeout) {
  const QuietC10dLogs quiet;  // a wait that runs out is said in one line, below
  store.set(identityKey(rank), encodeIdentity(mine));
  if (rank == 0) store.set(kVerdictKey, judge(store, worldSize, timeout));
  try {
    store.wait({kVerdictKey}, rank == 0 ? timeout : 2 * timeout);
  } catch (const c10::Error&) {
    throw RendezvousError(RendezvousError::Kind::Timeout,
                          "rendezvous: no run-identity verdict from rank 0 within " +
                              secondsText(2 * timeout) + " s (rank 0 not started or gone)");
  }
  const std::string verdict = store.get_to_str(kVerdictKey);
  if (verdict == kOk) return;
  // Rank 0 may host the store: it stays until every rank has read the verdict (bounded), so
  // that nobody sees a lost connection instead of the reason.
  const int64_t seen = store.add(kSeenKey, 1);
  if (rank == 0) waitUntilCount(store, kSeenKey, seen, worldSize, timeout);
  if (verdict.rfind("rendezvous:", 0) == 0)
    throw RendezvousError(RendezvousError::Kind::Timeout, verdict);
  if (verdict.rfind(kNetworkPrefix, 0) == 0)
    throw RendezvousError(RendezvousError::Kind::Network, verdict);
  throw RendezvousError(RendezvousError::Kind::Mismatch, verdict);
}

ClockEstimate estimateClockOffset(c10d::Store& store, int rank, int worldSize,
                                  const std::string& phase, std::chrono::milliseconds timeout,
                                  int rounds) {
  const QuietC10dLogs quiet;  // a wait that runs out is said in one line by the caller
  auto key = [&](int r, int k, const char* what) {
    return "stagescope/clock/" + phase + "/" + std::to_string(r) + "/" + std::to_string(k) + "/" +
           what;
  };
  if (rank == 0) {
    for (int r = 1; r < worldSize; ++r) {
      for (int k = 0; k < rounds; ++k) {
        try {
          store.wait({key(r, k, "ask")}, timeout);
        } catch (const c10::Error&) {
          throw RendezvousError(RendezvousError::Kind::Timeout,
                                "clock alignment (" + phase + "): rank " + std::to_string(r) +
                                    " did not ask for rank 0's time within " +
                                    secondsText(timeout) + " s");
        }
        store.set(key(r, k, "time"), std::to_string(nowNs()));
      }
    }
    return {};
  }
  ClockEstimate best;
  const int64_t started = nowNs();
  int64_t bestRtt = INT64_MAX;
  for (int k = 0; k < rounds; ++k) {
    const int64_t t1 = nowNs();
    store.set(key(rank, k, "ask"), "");
    try {
      store.wait({key(rank, k, "time")}, timeout);
    } catch (const c10::Error&) {
      throw RendezvousError(RendezvousError::Kind::Timeout, "clock alignment (" + phase +
                                                                "): rank 0 did not answer within " +
                                                                secondsText(timeout) + " s");
    }
    const int64_t t2 = nowNs();
    const int64_t theirs = storedNs(store, key(rank, k, "time"), phase);
    if (t2 - t1 < bestRtt) {
      bestRtt = t2 - t1;
      best.measuredNs = t1 + (t2 - t1) / 2 - theirs;
      best.uncertaintyNs = (t2 - t1 + 1) / 2;
    }
  }
  const int64_t magnitude = best.measuredNs < 0 ? -best.measuredNs : best.measuredNs;
  best.offsetNs = magnitude <= best.uncertaintyNs ? 0 : best.measuredNs;
  best.elapsedNs = nowNs() - started;
  return best;
}

}  // namespace stagescope::engine
