// Liveness in the store (core/engine/Liveness): a real TCPStore, real processes.  A peer is
// judged by its end record, by /proc when it ran on this machine (a killed child, as a zombie
// and after it is reaped), and by a heartbeat that stops moving when it ran elsewhere.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/engine/Liveness.h"

extern char** environ;

namespace stagescope::engine {
namespace {

using namespace std::chrono_literals;

c10::intrusive_ptr<c10d::Store> makeServer() {
  c10d::TCPStoreOptions o;
  o.port = 0;
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = 10s;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
}

void put(c10d::Store& s, const std::string& k, const std::string& v) {
  s.set(k, std::vector<uint8_t>(v.begin(), v.end()));
}

Liveness::Options fast() {
  Liveness::Options o;
  o.interval = 50ms;
  o.silentAfter = 600ms;
  o.watchSilentAfter = 600ms;
  return o;
}

const PeerFate& fateOf(const LivenessReport& r, int rank) {
  for (const auto& f : r.peers)
    if (f.rank == rank) return f;
  throw std::runtime_error("no fate for rank " + std::to_string(rank));
}

// A `sleep` child of this process, and its identity as a rank on this machine would publish it.
struct Child {
  pid_t pid = -1;
  ProcessIdentity id;
  Child() {
    const char* argv[] = {"sleep", "60", nullptr};
    EXPECT_EQ(posix_spawnp(&pid, "sleep", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    id = ProcessIdentity::self();
    id.pid = pid;
    for (int i = 0; i < 100; ++i) {  // its start time, once exec'd
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(in, line);
      std::istringstream rest(line.substr(line.rfind(')') + 1));
      std::vector<std::string> f;
      for (std::string x; rest >> x;) f.push_back(x);
      if (f.size() > 19) {
        id.startTicks = std::stoull(f[19]);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

TEST(Liveness, PublishesItsProcessABeatThatMovesAndHowItEnded) {
  auto store = makeServer();
  Liveness me(
      store, 0, 2, [] { return std::string("iteration 3, action 7 F"); }, fast());
  me.start();
  const auto id = ProcessIdentity::decode([&] {
    auto v = store->get("stagescope/live/0/id");
    return std::string(v.begin(), v.end());
  }());
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->pid, getpid());
  EXPECT_EQ(id->machine, ProcessIdentity::self().machine);
  auto beat = [&] {
    auto v = store->get("stagescope/live/0/beat");
    return std::string(v.begin(), v.end());
  };
  const std::string first = beat();
  EXPECT_NE(first.find("iteration 3, action 7 F"), std::string::npos) << first;
  std::string later = first;
  for (int i = 0; i < 200 && later == first; ++i) {
    std::this_thread::sleep_for(20ms);
    later = beat();
  }
  EXPECT_NE(later, first) << "the heartbeat did not move";
  me.end("failed boom");
  auto v = store->get("stagescope/live/0/end");
  EXPECT_EQ(std::string(v.begin(), v.end()), "failed boom");
}

TEST(Liveness, APeerThatRecordedAnErrorIsJudgedByItsEndRecord) {
  auto store = makeServer();
  Liveness peer(
      store, 1, 2, [] { return std::string("x"); }, fast());
  peer.start();
  peer.end("failed stopped on an error: boom");
  Liveness me(
      store, 0, 2, [] { return std::string("y"); }, fast());
  me.start();
  const LivenessReport r = me.observe(2s);
  EXPECT_TRUE(r.storeError.empty()) << r.storeError;
  EXPECT_EQ(fateOf(r, 1).kind, PeerFate::Kind::Failed);
  ASSERT_NE(r.rootCause(), nullptr);
  EXPECT_EQ(r.rootCause()->rank, 1);
  EXPECT_NE(r.rootCause()->sentence().find("boom"), std::string::npos);
}

TEST(Liveness, AKilledProcessOnThisMachineIsGoneWithItsSignalWhileAZombie) {
  auto store = makeServer();
  Child child;
  ASSERT_GT(child.id.startTicks, 0u);
  put(*store, "stagescope/live/1/id", child.id.encode());
  put(*store, "stagescope/live/1/beat", "4 1764589523307 iteration 1, action 4 F");
  Liveness me(
      store, 0, 2, [] { return std::string("y"); }, fast());
  me.start();
  EXPECT_EQ(fateOf(me.observe(0ms), 1).kind, PeerFate::Kind::Alive);  // it runs
  ASSERT_EQ(kill(child.pid, SIGKILL), 0);
  // Not reaped yet: a zombie, whose wait status /proc still holds.
  LivenessReport r;
  for (int i = 0; i < 100; ++i) {
    r = me.observe(0ms);
    if (fateOf(r, 1).kind == PeerFate::Kind::Gone) break;
    std::this_thread::sleep_for(20ms);
  }
  const PeerFate& zombie = fateOf(r, 1);
  ASSERT_EQ(zombie.kind, PeerFate::Kind::Gone);
  const std::string s = zombie.sentence();
  EXPECT_NE(
      s.find("rank 1 (host " + child.id.host + ", pid " + std::to_string(child.pid) +
             ") stopped heartbeating at 2025-12-01 11:45:23.307 UTC (doing at that heartbeat: "
             "iteration 1, action 4 F), process gone: killed by signal 9 (SIGKILL)"),
      std::string::npos)
      << s;
  EXPECT_EQ(zombie.signal(), SIGKILL);  // the field its peer_dead record carries
  // Reaped: gone, the signal no longer knowable from here.
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
  const PeerFate gone = fateOf(me.observe(0ms), 1);
  EXPECT_EQ(gone.kind, PeerFate::Kind::Gone);
  EXPECT_NE(gone.sentence().find("process gone: killed by a signal (SIGKILL, the OOM killer) or "
                                 "crashed, without a record of why"),
            std::string::npos)
      << gone.sentence();
  EXPECT_EQ(gone.signal(), 0);
}

// PeerFate::signal() is the signal its sentence names, and only that: a process gone from this
// machine (or the store's host) whose wait status named one; not an exit code, nor what a
// process elsewhere or still beating could not have told.
TEST(Liveness, ThePeersSignalIsTheOneItsSentenceNames) {
  PeerFate f;
  f.rank = 3;
  f.kind = PeerFate::Kind::Gone;
  f.process.state = ProcessState::Exited;
  f.process.signal = SIGABRT;
  EXPECT_EQ(f.signal(), SIGABRT);
  EXPECT_NE(f.sentence().find("killed by signal 6 (SIGABRT)"), std::string::npos) << f.sentence();
  f.storeLost = "connection reset";
  EXPECT_EQ(f.signal(), SIGABRT);
  EXPECT_NE(f.sentence().find("killed by signal 6 (SIGABRT)"), std::string::npos) << f.sentence();
  f.storeLost.clear();
  f.process.signal = 0;
  f.process.exitCode = 1;
  EXPECT_EQ(f.signal(), 0);
  EXPECT_NE(f.sentence().find("exited with code 1"), std::string::npos) << f.sentence();
  f.process.signal = SIGKILL;
  f.kind = PeerFate::Kind::Silent;  // its sentence tells no signal: neither does the field
  EXPECT_EQ(f.signal(), 0);
  EXPECT_EQ(f.sentence().find("signal 9"), std::string::npos) << f.sentence();
}

TEST(Liveness, APeerElsewhereIsSilentWhenItsBeatStopsAndAliveWhileItMoves) {
  auto store = makeServer();
  // Rank 1: another machine, a beat that never moves.  Rank 2: another machine, beating.
  ProcessIdentity far = ProcessIdentity::self();
  far.machine = "hostB|another-boot|pid:[1]";
  far.host = "hostB";
  put(*store, "stagescope/live/1/id", far.encode());
  put(*store, "stagescope/live/1/beat", "9 1764589523307 iteration 0, action 2 SF_RB");
  put(*store, "stagescope/live/2/id", far.encode());
  std::atomic<bool> beating{true};
  std::thread beater([&] {
    for (int n = 0; beating; ++n) {
      put(*store, "stagescope/live/2/beat", std::to_string(n) + " 1 busy");
      std::this_thread::sleep_for(50ms);
    }
  });
  Liveness::Options opts = fast();
  opts.silentAfter = 2s;  // rank 2's beater thread may be starved a while on a busy machine
  Liveness me(
      store, 0, 3, [] { return std::string("y"); }, opts);
  me.start();
  // Too short a window to say anything.
  EXPECT_EQ(fateOf(me.observe(100ms), 1).kind, PeerFate::Kind::Unknown);
  const LivenessReport r = me.observe();
  beating = false;
  beater.join();
  EXPECT_EQ(fateOf(r, 2).kind, PeerFate::Kind::Alive);
  const PeerFate& silent = fateOf(r, 1);
  ASSERT_EQ(silent.kind, PeerFate::Kind::Silent);
  EXPECT_NE(silent.sentence().find("rank 1 (host hostB, pid "), std::string::npos);
  EXPECT_NE(silent.sentence().find(
                "(doing at that heartbeat: iteration 0, action 2 SF_RB) and was silent for"),
            std::string::npos)
      << silent.sentence();
  ASSERT_NE(r.rootCause(), nullptr);
  EXPECT_EQ(r.rootCause()->rank, 1);
}

TEST(Liveness, ADeadPeerOutranksOneThatRecordedAnError) {
  auto store = makeServer();
  Liveness failed(
      store, 1, 3, [] { return std::string("x"); }, fast());
  failed.start();
  failed.end("failed error: boom");
  Child child;
  put(*store, "stagescope/live/2/id", child.id.encode());
  put(*store, "stagescope/live/2/beat", "1 1 iteration 0, action 0 F");
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
  Liveness me(
      store, 0, 3, [] { return std::string("y"); }, fast());
  me.start();
  const LivenessReport r = me.observe(0ms);
  ASSERT_NE(r.rootCause(), nullptr);
  EXPECT_EQ(r.rootCause()->rank, 2);
  EXPECT_EQ(r.rootCause()->kind, PeerFate::Kind::Gone);
}

TEST(Liveness, TheWatchedPeerThatStopsHeartbeatingIsReportedOnce) {
  auto store = makeServer();
  ProcessIdentity far = ProcessIdentity::self();
  far.machine = "hostB|another-boot|pid:[1]";
  put(*store, "stagescope/live/1/id", far.encode());
  put(*store, "stagescope/live/1/beat", "3 1 iteration 0, action 2 SF_RB");
  Liveness me(
      store, 0, 2, [] { return std::string("y"); }, fast());
  std::atomic<int> reports{0};
  std::atomic<int> kind{-1};
  me.watch([] { return 1; },
           [&](const PeerFate& f) {
             kind = static_cast<int>(f.kind);
             ++reports;
           });
  me.start();
  for (int i = 0; i < 500 && reports == 0; ++i) std::this_thread::sleep_for(20ms);
  std::this_thread::sleep_for(300ms);  // no second report
  EXPECT_EQ(reports.load(), 1);
  EXPECT_EQ(kind.load(), static_cast<int>(PeerFate::Kind::Silent));
}

TEST(Liveness, AStoreThatStopsAnsweringNamesTheRankThatHostedIt) {
  auto server = makeServer();
  const int port = static_cast<c10d::TCPStore*>(server.get())->getPort();
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = false;
  o.timeout = 2s;
  auto client = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  Child child;  // stands for rank 0, the store's host
  put(*client, "stagescope/live/0/id", child.id.encode());
  Liveness::Options opts = fast();
  opts.storeHost = 0;
  Liveness me(
      client, 1, 2, [] { return std::string("y"); }, opts);
  me.start();
  me.learnPeers();
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
  server.reset();  // the store goes with its host
  const LivenessReport r = me.observe(0ms);
  EXPECT_FALSE(r.storeError.empty());
  ASSERT_NE(r.rootCause(), nullptr);
  EXPECT_EQ(r.rootCause()->rank, 0);
  EXPECT_NE(r.rootCause()->sentence().find("hosted the store, which stopped answering"),
            std::string::npos)
      << r.rootCause()->sentence();
  EXPECT_NE(r.rootCause()->sentence().find("process gone"), std::string::npos);
}

}  // namespace
}  // namespace stagescope::engine
