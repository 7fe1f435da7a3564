#include "core/engine/Liveness.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace stagescope::engine {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> gSignal{0};  // set by notifySignal (a signal handler), read by the thread

std::string key(int rank, const char* what) {
  return "stagescope/live/" + std::to_string(rank) + "/" + what;
}

int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utcText(int64_t ms) {
  const std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

// A key's value, or nothing when it is not set (never blocks: check first, then get).
std::optional<std::string> getIf(c10d::Store& store, const std::string& k) {
  if (!store.check({k})) return std::nullopt;
  const std::vector<uint8_t> v = store.get(k);
  return std::string(v.begin(), v.end());
}

// "<count> <unix ms> <last action>"
struct Beat {
  int64_t count = -1;
  int64_t unixMs = 0;
  std::string lastAction;
};
Beat parseBeat(const std::string& text) {
  Beat b;
  std::istringstream in(text);
  in >> b.count >> b.unixMs;
  std::getline(in >> std::ws, b.lastAction);
  return b;
}

std::string firstLineOf(const std::exception& e) {
  std::string m = e.what();
  return m.substr(0, m.find('\n'));
}

}  // namespace

struct Liveness::State {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0, worldSize = 1;
  Options opts;
  std::function<std::string()> lastAction;
  ProcessIdentity self;

  std::mutex mu;  // guards everything below and serializes this rank's beats
  std::condition_variable cv;
  bool stopping = false, ended = false;
  bool storeFailed = false;  // a store operation of the thread failed: it stops using the store
  int64_t count = 0;
  Clock::time_point lastBeat{};
  std::thread::id threadId;
  std::map<int, ProcessIdentity> ids;  // peers' identities, read once

  std::function<int()> waitingOn;
  std::function<void(const PeerFate&)> onDead;
  std::function<void(int)> onSignal;
  bool deadReported = false;
  int watchedPeer = -1;
  int64_t watchedCount = -1;
  Clock::time_point watchedSince{};

  std::promise<void> exited;

  // One beat when the last is at least `interval` old (or `force`).  Never throws.  `mu` is not
  // held during the store write: end() and stop() never wait behind a slow store.
  std::mutex beatMu;  // one beat at a time (the thread and observe() may both beat)
  void beat(bool force) {
    std::lock_guard<std::mutex> one(beatMu);
    int64_t n = 0;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (ended || storeFailed || (!force && Clock::now() - lastBeat < opts.interval)) return;
      lastBeat = Clock::now();
      n = ++count;
    }
    const std::string v = std::to_string(n) + " " + std::to_string(unixMs()) + " " + lastAction();
    try {
      store->set(key(rank, "beat"), std::vector<uint8_t>(v.begin(), v.end()));
    } catch (const std::exception&) {
      // The store is gone: observers report it; beating again would only log the same error.
      std::lock_guard<std::mutex> lk(mu);
      storeFailed = true;
    }
  }

  // What the store and this machine say about `peer` now.  Throws when the store fails.
  PeerFate read(int peer, Beat* beatOut) {
    PeerFate f;
    f.rank = peer;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = ids.find(peer);
      if (it != ids.end()) f.id = it->second;
    }
    if (!f.id) {
      if (auto text = getIf(*store, key(peer, "id"))) {
        f.id = ProcessIdentity::decode(*text);
        std::lock_guard<std::mutex> lk(mu);
        if (f.id) ids[peer] = *f.id;
      }
    }
    Beat b;
    if (auto text = getIf(*store, key(peer, "beat"))) b = parseBeat(*text);
    f.lastBeatUnixMs = b.unixMs;
    f.lastAction = b.lastAction;
    if (beatOut) *beatOut = b;
    if (auto end = getIf(*store, key(peer, "end"))) {
      const std::string word = end->substr(0, end->find(' '));
      f.ended = end->size() > word.size() ? end->substr(word.size() + 1) : "";
      f.kind = word == "completed" ? PeerFate::Kind::Completed
               : word == "killed"  ? PeerFate::Kind::Killed
               : word == "failed"  ? PeerFate::Kind::Failed
                                   : PeerFate::Kind::Consequence;
      return f;
    }
    if (f.id) {
      f.process = processStatus(*f.id);
      if (f.process.state == ProcessState::Gone || f.process.state == ProcessState::Exited)
        f.kind = PeerFate::Kind::Gone;
      else if (f.process.state == ProcessState::Running)
        f.kind = PeerFate::Kind::Alive;
    }
    return f;
  }

  // The peer this rank waits on, checked once per beat.
  void watchTick() {
    std::function<int()> who;
    std::function<void(const PeerFate&)> dead;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!waitingOn || deadReported || ended || storeFailed) return;
      who = waitingOn;
      dead = onDead;
    }
    const int peer = who();
    if (peer < 0 || peer == rank || peer >= worldSize) {
      watchedPeer = -1;
      return;
    }
    if (peer != watchedPeer) {
      watchedPeer = peer;
      watchedCount = -1;
      watchedSince = Clock::now();
    }
    PeerFate f;
    Beat b;
    try {
      f = read(peer, &b);
    } catch (const std::exception&) {
      // The store failed: the rank's own wait ends by its timeout and reports it.
      std::lock_guard<std::mutex> lk(mu);
      storeFailed = true;
      return;
    }
    if (f.kind == PeerFate::Kind::Unknown && b.count >= 0) {
      if (b.count != watchedCount) {
        watchedCount = b.count;
        watchedSince = Clock::now();
      } else if (Clock::now() - watchedSince >= opts.watchSilentAfter) {
        f.kind = PeerFate::Kind::Silent;
        f.silentSeconds = std::chrono::duration<double>(Clock::now() - watchedSince).count();
      }
    }
    if (f.kind != PeerFate::Kind::Gone && f.kind != PeerFate::Kind::Silent) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (deadReported) return;
      deadReported = true;
    }
    dead(f);
  }

  void signalTick() {
    const int sig = gSignal.exchange(0);
    if (sig == 0) return;
    std::function<void(int)> handler;
    {
      std::lock_guard<std::mutex> lk(mu);
      handler = onSignal;
    }
    if (handler) handler(sig);
  }

  void loop() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (stopping) break;
      }
      beat(false);
      signalTick();
      watchTick();
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::min(opts.interval, std::chrono::milliseconds(250)),
                  [&] { return stopping; });
      if (stopping) break;
    }
    exited.set_value();
  }
};

int PeerFate::signal() const {
  const bool said = !storeLost.empty() || kind == Kind::Gone;  // what sentence() tells of
  return said && process.state == ProcessState::Exited ? process.signal : 0;
}

std::string PeerFate::sentence() const {
  std::string who = "rank " + std::to_string(rank);
  if (id) who += " (host " + id->host + ", pid " + std::to_string(id->pid) + ")";
  const std::string stoppedAt =
      lastBeatUnixMs > 0
          ? " stopped heartbeating at " + utcText(lastBeatUnixMs) +
                (lastAction.empty() ? "" : " (doing at that heartbeat: " + lastAction + ")")
          : " stopped before its first heartbeat";
  if (!storeLost.empty()) {
    std::string how = "killed, crashed or unreachable";
    if (signal())
      how = "process gone: killed by signal " + std::to_string(signal()) + " (" +
            signalName(signal()) + ")";
    else if (kind == Kind::Gone)
      how = "process gone: killed by a signal (SIGKILL, the OOM killer) or crashed";
    return who + " hosted the store, which stopped answering (" + storeLost + "): " + how;
  }
  switch (kind) {
    case Kind::Gone: {
      std::string how = "killed by a signal (SIGKILL, the OOM killer) or crashed";
      if (process.state == ProcessState::Exited) {
        how = signal() ? "killed by signal " + std::to_string(signal()) + " (" +
                             signalName(signal()) + ")"
                       : "exited with code " + std::to_string(process.exitCode);
      }
      return who + stoppedAt + ", process gone: " + how + ", without a record of why";
    }
    case Kind::Silent: {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", silentSeconds);
      return who + stoppedAt + " and was silent for " + secs +
             " s: killed, crashed or its host is unreachable (it runs on another host: its "
             "process cannot be checked from here), without a record of why";
    }
    case Kind::Alive:
      return who + " is alive" + (lastAction.empty() ? "" : " (" + lastAction + ")");
    case Kind::Unknown:
      return who + " was not seen (no heartbeat)";
    default:
      return who + " " + ended;
  }
}

const PeerFate* LivenessReport::rootCause() const {
  auto order = [](const PeerFate& f) {
    return f.kind == PeerFate::Kind::Gone || f.kind == PeerFate::Kind::Silent ? 0
           : f.kind == PeerFate::Kind::Killed                                 ? 1
                                                                              : 2;
  };
  const PeerFate* best = nullptr;
  for (const auto& f : peers) {
    if (!f.isCause()) continue;
    if (!best || order(f) < order(*best) ||
        (order(f) == order(*best) && order(f) == 0 && f.lastBeatUnixMs < best->lastBeatUnixMs))
      best = &f;
  }
  return best;
}

Liveness::Liveness(c10::intrusive_ptr<c10d::Store> store, int rank, int worldSize,
                   std::function<std::string()> lastAction, Options opts)
    : state_(std::make_shared<State>()), opts_(opts) {
  state_->store = std::move(store);
  state_->rank = rank;
  state_->worldSize = worldSize;
  state_->opts = opts;
  state_->lastAction = std::move(lastAction);
  state_->self = ProcessIdentity::self();
}

Liveness::~Liveness() {
  stop();
}

void Liveness::start() {
  const std::string id = state_->self.encode();
  state_->store->set(key(state_->rank, "id"), std::vector<uint8_t>(id.begin(), id.end()));
  state_->beat(true);
  auto s = state_;
  exited_ = state_->exited.get_future().share();
  thread_ = std::thread([s] { s->loop(); });
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->threadId = thread_.get_id();
}

void Liveness::end(const std::string& how) {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->ended) return;
    state_->ended = true;
  }
  try {
    state_->store->set(key(state_->rank, "end"), std::vector<uint8_t>(how.begin(), how.end()));
  } catch (const std::exception&) {
    // Nothing to tell peers through a store that is gone.
  }
  stop();
}

void Liveness::stop() {
  std::thread::id tid;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stopping = true;
    tid = state_->threadId;
  }
  state_->cv.notify_all();
  std::thread& t = thread_;
  if (!t.joinable() || tid == std::this_thread::get_id()) return;  // the thread stops itself
  // A beat stuck in a store that stopped answering must not hold the rank's exit.
  if (exited_.wait_for(std::chrono::seconds(2)) == std::future_status::ready)
    t.join();
  else
    t.detach();
}

void Liveness::watch(std::function<int()> waitingOn, std::function<void(const PeerFate&)> onDead) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->waitingOn = std::move(waitingOn);
  state_->onDead = std::move(onDead);
}

void Liveness::onSignal(std::function<void(int)> handler) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->onSignal = std::move(handler);
}

void Liveness::notifySignal(int sig) {
  gSignal.store(sig);
}

const ProcessIdentity& Liveness::self() const {
  return state_->self;
}

LivenessReport Liveness::observe(std::chrono::milliseconds window) {
  LivenessReport report;
  const auto t0 = Clock::now();
  try {
    std::vector<size_t> pending;  // indexes into report.peers of peers not settled yet
    std::map<int, int64_t> firstCount;
    for (int r = 0; r < state_->worldSize; ++r) {
      if (r == state_->rank) continue;
      Beat b;
      report.peers.push_back(state_->read(r, &b));
      if (report.peers.back().kind == PeerFate::Kind::Unknown && b.count >= 0) {
        pending.push_back(report.peers.size() - 1);
        firstCount[r] = b.count;
      }
    }
    while (!pending.empty() && Clock::now() - t0 < window) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      state_->beat(false);  // this rank keeps beating while it observes (any thread)
      std::vector<size_t> still;
      for (size_t i : pending) {
        Beat b;
        PeerFate f = state_->read(report.peers[i].rank, &b);
        if (f.kind == PeerFate::Kind::Unknown && b.count != firstCount[f.rank])
          f.kind = PeerFate::Kind::Alive;
        report.peers[i] = f;
        if (f.kind == PeerFate::Kind::Unknown) still.push_back(i);
      }
      pending = std::move(still);
    }
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t i : pending) {
      if (Clock::now() - t0 < state_->opts.silentAfter) continue;  // too short to say
      report.peers[i].kind = PeerFate::Kind::Silent;
      report.peers[i].silentSeconds = waited;
    }
  } catch (const std::exception& e) {
    report.storeError = firstLineOf(e);
    const int host = state_->opts.storeHost;
    if (host >= 0 && host != state_->rank) {
      PeerFate f;
      f.rank = host;
      f.storeLost = report.storeError;
      {
        std::lock_guard<std::mutex> lk(state_->mu);
        auto it = state_->ids.find(host);
        if (it != state_->ids.end()) f.id = it->second;
      }
      if (f.id) f.process = processStatus(*f.id);
      f.kind = f.process.state == ProcessState::Gone || f.process.state == ProcessState::Exited
                   ? PeerFate::Kind::Gone
                   : PeerFate::Kind::Silent;
      if (f.process.state != ProcessState::Running) {
        report.peers.erase(std::remove_if(report.peers.begin(), report.peers.end(),
                                          [&](const PeerFate& p) { return p.rank == host; }),
                           report.peers.end());
        report.peers.push_back(f);
      }
    }
  }
  return report;
}

void Liveness::awaitPeers(std::chrono::milliseconds limit) {
  const auto t0 = Clock::now();
  std::map<int, std::pair<int64_t, Clock::time_point>> seen;  // beat count, since when
  for (;;) {
    bool pending = false;
    for (int r = 0; r < state_->worldSize; ++r) {
      if (r == state_->rank) continue;
      Beat b;
      PeerFate f;
      try {
        f = state_->read(r, &b);
      } catch (const std::exception&) {
        return;  // no store: nothing to wait for
      }
      if (f.kind != PeerFate::Kind::Alive && f.kind != PeerFate::Kind::Unknown) continue;
      if (b.count < 0) continue;  // it never beat: it will not write an end record either
      auto it = seen.find(r);
      if (it == seen.end() || it->second.first != b.count) {
        seen[r] = {b.count, Clock::now()};
        pending = true;
      } else if (Clock::now() - it->second.second < state_->opts.silentAfter) {
        pending = true;
      }
    }
    if (!pending || Clock::now() - t0 >= limit) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Liveness::learnPeers() {
  for (int r = 0; r < state_->worldSize; ++r) {
    if (r == state_->rank) continue;
    try {
      state_->read(r, nullptr);
    } catch (const std::exception&) {
      return;
    }
  }
}

}  // namespace stagescope::engine
