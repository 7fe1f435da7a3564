#include "core/analysis/NcclReplay.h"
#include "core/analysis/RecordFilter.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace stagescope::analysis {

using Kind = NcclOp::Kind;

const char* toString(NcclRule r) {
  switch (r) {
    case NcclRule::LazyInit:
      return "lazy_init";
    case NcclRule::FirstBatchAllMembers:
      return "first_batch";
    case NcclRule::BatchTogether:
      return "batch_together";
    case NcclRule::NoBuffering:
      return "no_buffering";
    case NcclRule::CommunicatorOrder:
      return "communicator_order";
    case NcclRule::CollectiveOrder:
      return "collective_order";
  }
  return "?";
}

namespace {

std::string joinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

// ---- the replay ---------------------------------------------------------------------------------

struct Kernel {
  std::vector<int> ops;  // indices into the rank's ops
  std::vector<char> matched;
  bool collective = false;
};

struct Comm {
  std::string label;
  std::vector<int> members;
  bool pair = false;
  bool initialised = false;
  bool firstByBatch = false;  // its first use is a batch (rule first_batch)
  std::set<int> joined;
  std::map<int, std::deque<Kernel>> queue;
  std::map<std::pair<int, int>, int> deposits;  // buffered sends per (source, destination)
};

class Replay {
 public:
  Replay(const NcclProgram& p, const NcclReplayOptions& o) : p_(p), o_(o) {
    // Every rank an op names (a peer, a group member) gets a program, empty when it recorded
    // nothing: a file whose peers lie past its last rank is judged, never read out of bounds.
    size_t ranks = p_.ops.size();
    for (const auto& rank : p_.ops) {
      for (const auto& op : rank) {
        if (op.peer >= 0) ranks = std::max(ranks, static_cast<size_t>(op.peer) + 1);
        for (int m : op.members) {
          if (m >= 0) ranks = std::max(ranks, static_cast<size_t>(m) + 1);
        }
      }
    }
    p_.ops.resize(ranks);
    p_.steps.resize(std::max(ranks, p_.steps.size()));
    const int n = static_cast<int>(p_.ops.size());
    pc_.assign(n, 0);
    joining_.assign(n, -1);
    done_.resize(n);
    commOf_.resize(n);
    for (int r = 0; r < n; ++r) {
      done_[r].assign(p_.ops[r].size(), 0);
      commOf_[r].assign(p_.ops[r].size(), -1);
      for (size_t i = 0; i < p_.ops[r].size(); ++i) commOf_[r][i] = commFor(p_.ops[r][i]);
    }
    if (o_.eager || o_.glooModel) {
      for (auto& c : comms_) c.initialised = true;
    }
  }

  NcclReplayResult run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t r = 0; r < p_.steps.size(); ++r) progress |= host(static_cast<int>(r));
      for (auto& c : comms_) progress |= advance(c);
      if (o_.glooModel) progress |= advanceBuffered();
    }
    NcclReplayResult res;
    res.ops = p_.opCount();
    res.communicators = comms_.size();
    for (size_t r = 0; r < p_.steps.size(); ++r) {
      if (!p_.steps[r].empty()) ++res.ranks;
    }
    for (size_t r = 0; r < p_.steps.size(); ++r) {
      if (pc_[r] < p_.steps[r].size()) res.blocked.push_back(diagnose(static_cast<int>(r)));
    }
    res.completed = res.blocked.empty();
    if (!res.completed) explain(res);
    return res;
  }

 private:
  // The communicator an op runs on (ProcessGroupNCCL): a plain send/recv uses the 2-rank
  // communicator of its pair in its group unless the group's communicator exists eagerly; a
  // batch and a collective use the group's.
  int commFor(const NcclOp& op) {
    std::string key;
    Comm c;
    const bool p2p = op.kind != Kind::Collective;
    if (p2p && op.batch < 0 && !(o_.eager && !op.members.empty())) {
      int lo = std::min(op.rank, op.peer), hi = std::max(op.rank, op.peer);
      key = "pair:" + op.group + ":" + std::to_string(lo) + "-" + std::to_string(hi);
      c.members = {lo, hi};
      c.pair = true;
      c.label = "the communicator of ranks " + std::to_string(lo) + " and " + std::to_string(hi) +
                " in group " + op.group;
    } else {
      c.members = op.members;
      if (c.members.empty()) {  // not recorded: at least the two ends
        c.members = {std::min(op.rank, op.peer), std::max(op.rank, op.peer)};
      }
      key = "group:" + op.group + ":" + joinRanks(c.members);
      c.label = "the communicator of group " + op.group + " (ranks " + joinRanks(c.members) + ")";
    }
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    index_[key] = static_cast<int>(comms_.size());
    comms_.push_back(std::move(c));
    return static_cast<int>(comms_.size()) - 1;
  }

  const NcclOp& op(int r, int i) const { return p_.ops[r][i]; }

  bool host(int r) {
    bool progress = false;
    const auto& steps = p_.steps[r];
    while (pc_[r] < steps.size()) {
      const NcclStep& s = steps[pc_[r]];
      if (s.wait) {
        bool all = std::all_of(s.ops.begin(), s.ops.end(), [&](int i) { return done_[r][i]; });
        if (!all) break;
        ++pc_[r];
        progress = true;
        continue;
      }
      // A step's ops share one communicator (a batch is on its group's): post them as one
      // kernel once it is initialised.
      int ci = commOf_[r][s.ops[0]];
      Comm& c = comms_[ci];
      if (!c.initialised) {
        if (c.joined.empty() && c.queue.empty()) {
          c.firstByBatch = op(r, s.ops[0]).batch >= 0;
        }
        if (joining_[r] != ci) {
          joining_[r] = ci;
          c.joined.insert(r);
          progress = true;
        }
        bool all = std::all_of(c.members.begin(), c.members.end(),
                               [&](int m) { return c.joined.count(m) > 0; });
        if (!all) break;
        c.initialised = true;
        for (int m : c.members) {
          if (m < static_cast<int>(joining_.size()) && joining_[m] == ci) joining_[m] = -1;
        }
      }
      joining_[r] = -1;
      if (o_.glooModel && op(r, s.ops[0]).kind != Kind::Collective) {
        postBuffered(r, s.ops);
        ++pc_[r];
        progress = true;
        continue;
      }
      Kernel k;
      k.ops = s.ops;
      k.matched.assign(s.ops.size(), 0);
      k.collective = op(r, s.ops[0]).kind == Kind::Collective;
      c.queue[r].push_back(std::move(k));
      ++pc_[r];
      progress = true;
    }
    return progress;
  }

  // Gloo: a send is complete when posted; the k-th receive on a channel (group, source,
  // destination) completes once the k-th send on it was posted.
  using Channel = std::tuple<std::string, int, int>;
  void postBuffered(int r, const std::vector<int>& ops) {
    for (int i : ops) {
      const NcclOp& o = op(r, i);
      if (o.kind == Kind::Send) {
        done_[r][i] = 1;
        ++sent_[{o.group, r, o.peer}];
      } else {
        recvs_.push_back({r, i, received_[{o.group, o.peer, r}]++});
      }
    }
  }
  bool advanceBuffered() {
    bool any = false;
    for (auto& [r, i, k] : recvs_) {
      const NcclOp& o = op(r, i);
      if (!done_[r][i] && sent_[{o.group, o.peer, r}] > k) {
        done_[r][i] = 1;
        any = true;
      }
    }
    return any;
  }

  // NCCL's connection buffers: a small send at the head of its queue completes into the
  // buffer; a receive at the head of its queue takes the oldest buffered send of its channel.
  bool deposit(Comm& c) {
    bool changed = false;
    for (auto& [r, q] : c.queue) {
      if (q.empty() || q.front().collective) continue;
      Kernel& k = q.front();
      std::set<std::pair<int, int>> seen;
      for (size_t j = 0; j < k.ops.size(); ++j) {
        if (k.matched[j]) continue;
        const NcclOp& o = op(r, k.ops[j]);
        if (!seen.insert({static_cast<int>(o.kind), o.peer}).second) continue;
        if (o.kind == Kind::Send && o.bytes >= 0 && o.bytes <= o_.bufferedSendBytes) {
          ++c.deposits[{r, o.peer}];
          k.matched[j] = 1;
          changed = true;
        } else if (o.kind == Kind::Recv && c.deposits[{o.peer, r}] > 0) {
          --c.deposits[{o.peer, r}];
          k.matched[j] = 1;
          changed = true;
        }
      }
    }
    return changed;
  }

  // Progress of the kernels at the head of each member's queue on one communicator.
  bool advance(Comm& c) {
    bool any = false, changed = true;
    while (changed) {
      changed = false;
      if (o_.bufferedSendBytes > 0) changed |= deposit(c);
      for (auto& [r, q] : c.queue) {
        if (q.empty() || q.front().collective) continue;
        Kernel& k = q.front();
        std::set<std::pair<int, int>> seen;  // (kind, peer): only the first unmatched of each
        for (size_t j = 0; j < k.ops.size(); ++j) {
          if (k.matched[j]) continue;
          const NcclOp& o = op(r, k.ops[j]);
          if (!seen.insert({static_cast<int>(o.kind), o.peer}).second) continue;
          if (o.kind == Kind::Send && c.deposits[{r, o.peer}] > 0) continue;  // FIFO after them
          auto pq = c.queue.find(o.peer);
          if (pq == c.queue.end() || pq->second.empty() || pq->second.front().collective) continue;
          Kernel& other = pq->second.front();
          for (size_t m = 0; m < other.ops.size(); ++m) {
            const NcclOp& x = op(o.peer, other.ops[m]);
            if (other.matched[m] || x.peer != r || x.kind == o.kind) continue;
            k.matched[j] = other.matched[m] = 1;
            changed = true;
            break;
          }
        }
      }
      // Collectives: every member has one at its head.
      bool heads = !c.members.empty();
      for (int m : c.members) {
        auto q = c.queue.find(m);
        if (q == c.queue.end() || q->second.empty() || !q->second.front().collective) heads = false;
      }
      if (heads) {
        const std::string& name = op(c.members[0], c.queue[c.members[0]].front().ops[0]).op;
        bool same = true;
        for (int m : c.members) same &= op(m, c.queue[m].front().ops[0]).op == name;
        if (same) {
          for (int m : c.members) {
            auto& k = c.queue[m].front();
            std::fill(k.matched.begin(), k.matched.end(), 1);
          }
          changed = true;
        }
      }
      // A kernel completes when all its ops progressed (a batch: together).
      for (auto& [r, q] : c.queue) {
        while (!q.empty() && std::all_of(q.front().matched.begin(), q.front().matched.end(),
                                         [](char x) { return x != 0; })) {
          for (int i : q.front().ops) done_[r][i] = 1;
          q.pop_front();
          changed = true;
        }
      }
      any |= changed;
    }
    return any;
  }

  std::string describe(int r, int i) const {
    const NcclOp& o = op(r, i);
    if (o.kind == Kind::Collective) return o.what + " on group " + o.group;
    return std::string(o.kind == Kind::Send ? "send of " : "receive of ") + o.what +
           (o.kind == Kind::Send ? " to rank " : " from rank ") + std::to_string(o.peer);
  }

  // An op in a few words: "send to rank 4 (group pp)", "broadcast on group bridge".
  std::string shortOp(int r, int i) const {
    const NcclOp& o = op(r, i);
    if (o.kind == Kind::Collective) return o.op + " on group " + o.group;
    return std::string(o.kind == Kind::Send ? "send to rank " : "receive from rank ") +
           std::to_string(o.peer) + " (group " + o.group + ")";
  }

  // What rank m is doing, as a clause: "is blocked initialising ...", "has finished".
  std::string stateOf(int m) const {
    if (m >= static_cast<int>(p_.steps.size()) || p_.steps[m].empty()) {
      return "records no operation";
    }
    if (pc_[m] >= p_.steps[m].size()) return "has finished";
    const NcclStep& s = p_.steps[m][pc_[m]];
    if (!s.wait) {
      return "is blocked initialising " + comms_[commOf_[m][s.ops[0]]].label + " (its " +
             describe(m, s.ops[0]) + ")";
    }
    for (int i : s.ops) {
      if (!done_[m][i]) return "waits for its " + describe(m, i);
    }
    return "is blocked";
  }

  // The op rank m is blocked in, as "its send of ... to rank 4" ("its end" when finished).
  std::string blockedIn(int m) const {
    if (m < 0 || m >= static_cast<int>(p_.steps.size()) || pc_[m] >= p_.steps[m].size()) {
      return "its end";
    }
    const NcclStep& s = p_.steps[m][pc_[m]];
    for (int i : s.ops) {
      if (!s.wait || !done_[m][i]) return "its " + describe(m, i);
    }
    return "its next step";
  }

  // Whether rank m has op i queued (posted, not complete) on communicator ci.
  const Kernel* queued(int m, int ci, int i) const {
    auto q = comms_[ci].queue.find(m);
    if (q == comms_[ci].queue.end()) return nullptr;
    for (const auto& k : q->second) {
      if (std::find(k.ops.begin(), k.ops.end(), i) != k.ops.end()) return &k;
    }
    return nullptr;
  }

  // Why op i of rank r (at the head of its queue, unmatched) cannot progress.
  void whyBlocked(int r, int i, NcclBlocked& b, std::string& why, std::string& fix) const {
    const NcclOp& o = op(r, i);
    const int ci = commOf_[r][i];
    const Comm& c = comms_[ci];
    if (o.kind == Kind::Collective) {
      for (int m : c.members) {
        auto q = c.queue.find(m);
        if (q != c.queue.end() && !q->second.empty() && q->second.front().collective &&
            op(m, q->second.front().ops[0]).op == o.op) {
          continue;
        }
        b.waitsOn = m;
        if (q != c.queue.end() && !q->second.empty() && q->second.front().collective) {
          b.rule = NcclRule::CollectiveOrder;
          why = "rank " + std::to_string(m) + " runs " + describe(m, q->second.front().ops[0]) +
                " in its place";
          fix = "run the collectives of group " + o.group + " in one order on every member";
        } else {
          b.rule = NcclRule::CollectiveOrder;
          why = "rank " + std::to_string(m) + " has not joined it: it " + stateOf(m);
          fix = "move rank " + std::to_string(m) + "'s " + o.op + " on group " + o.group +
                " before what blocks it";
        }
        return;
      }
      return;
    }
    const int p = o.peer;
    b.waitsOn = p;
    // The peer's matching op: posted on this communicator, or not yet.
    int match = -1;
    for (size_t j = 0; j < p_.ops[p].size(); ++j) {
      const NcclOp& x = p_.ops[p][j];
      if (!done_[p][j] && x.kind != Kind::Collective && x.kind != o.kind && x.peer == r &&
          commOf_[p][j] == ci) {
        match = static_cast<int>(j);
        break;
      }
    }
    const Kernel* k = match >= 0 ? queued(p, ci, match) : nullptr;
    if (k) {
      auto q = c.queue.find(p);
      int head = q->second.front().ops[0];
      for (size_t j = 0; j < q->second.front().ops.size(); ++j) {
        if (!q->second.front().matched[j]) {
          head = q->second.front().ops[j];
          break;
        }
      }
      b.rule = NcclRule::CommunicatorOrder;
      why = "rank " + std::to_string(p) + " has the " + describe(p, match) + " queued on " +
            c.label + " behind its " + describe(p, head);
      fix = "post rank " + std::to_string(p) + "'s " + describe(p, match) + " before its " +
            describe(p, head) + ", or post both in one batch_isend_irecv";
      return;
    }
    b.rule = o.kind == Kind::Send ? NcclRule::NoBuffering : b.rule;
    if (o.kind == Kind::Recv && b.rule != NcclRule::BatchTogether) b.rule = NcclRule::NoBuffering;
    why = "rank " + std::to_string(p) + " has not posted the matching " +
          (o.kind == Kind::Send ? "receive" : "send") + ": it " + stateOf(p);
    fix = "post rank " + std::to_string(p) + "'s matching " +
          (o.kind == Kind::Send ? "receive" : "send") + " before what blocks it, or post the " +
          "two ranks' ops in one batch_isend_irecv each";
  }

  NcclBlocked diagnose(int r) {
    NcclBlocked b;
    b.rank = r;
    const NcclStep& s = p_.steps[r][pc_[r]];
    std::string R = "rank " + std::to_string(r);
    std::string why, fix;
    if (!s.wait) {
      const int ci = commOf_[r][s.ops[0]];
      const Comm& c = comms_[ci];
      b.rule = (!c.pair && c.firstByBatch) ? NcclRule::FirstBatchAllMembers : NcclRule::LazyInit;
      if (!c.pair) groupInit_.insert(r);
      for (int m : c.members) {
        if (!c.joined.count(m)) {
          b.waitsOn = m;
          break;
        }
      }
      std::string group = op(r, s.ops[0]).group;
      b.brief = R + " creates " +
                (c.pair ? "its communicator with rank " + std::to_string(op(r, s.ops[0]).peer) +
                              " in group " + op(r, s.ops[0]).group
                        : "group " + op(r, s.ops[0]).group + "'s communicator") +
                " at its first use and waits there for rank " + std::to_string(b.waitsOn);
      b.sentence = R + " would initialise " + c.label + " at its first use (its " +
                   describe(r, s.ops[0]) + ") and wait there for rank " +
                   std::to_string(b.waitsOn) + ", which " + stateOf(b.waitsOn);
      const std::string W = "rank " + std::to_string(b.waitsOn);
      const std::string blocker = blockedIn(b.waitsOn);
      fixes_[r] = b.rule == NcclRule::FirstBatchAllMembers
                      ? "make every member of group " + group +
                            " join its first batch_isend_irecv (or create the group eagerly), "
                            "or move " +
                            W + "'s first use of it before " + blocker
                      : "create group " + group +
                            "'s communicator eagerly (init_process_group(device_id=...)), or "
                            "move " +
                            W + "'s first use of it before " + blocker;
      return b;
    }
    int i = -1;
    for (int x : s.ops) {
      if (!done_[r][x]) {
        i = x;
        break;
      }
    }
    const int ci = commOf_[r][i];
    const Comm& c = comms_[ci];
    const Kernel* k = queued(r, ci, i);
    auto q = c.queue.find(r);
    if (!k || q == c.queue.end() || q->second.empty()) {  // Gloo: a receive with no send
      b.rule = NcclRule::NoBuffering;
      b.waitsOn = op(r, i).peer;
      b.sentence = R + " waits for its " + describe(r, i) + "; rank " + std::to_string(b.waitsOn) +
                   " never posts the send: it " + stateOf(b.waitsOn);
      b.brief = R + " waits for its " + shortOp(r, i) + ", never sent";
      return b;
    }
    const Kernel& head = q->second.front();
    int blocking = i;
    std::string prefix = R + " waits for its " + describe(r, i);
    if (k != &head) {
      for (size_t j = 0; j < head.ops.size(); ++j) {
        if (!head.matched[j]) {
          blocking = head.ops[j];
          break;
        }
      }
      prefix += ", queued on " + c.label + " behind its " + describe(r, blocking);
      whyBlocked(r, blocking, b, why, fix);
      b.rule = NcclRule::CommunicatorOrder;
    } else {
      size_t pos = std::find(k->ops.begin(), k->ops.end(), i) - k->ops.begin();
      if (k->matched[pos]) {
        for (size_t j = 0; j < k->ops.size(); ++j) {
          if (!k->matched[j]) {
            blocking = k->ops[j];
            break;
          }
        }
        prefix += ", which completes only with its batch's " + describe(r, blocking);
        whyBlocked(r, blocking, b, why, fix);
        b.rule = NcclRule::BatchTogether;
      } else {
        whyBlocked(r, i, b, why, fix);
      }
    }
    b.sentence = prefix + "; " + why;
    b.brief = R + " waits for its " + shortOp(r, i);
    if (blocking != i) {
      b.brief += (b.rule == NcclRule::BatchTogether ? ", whose batch waits for its "
                                                    : ", queued behind its ") +
                 shortOp(r, blocking);
    }
    if (b.waitsOn >= 0) b.brief += ", which needs rank " + std::to_string(b.waitsOn);
    fixes_[r] = fix;
    return b;
  }

  void explain(NcclReplayResult& res) {
    std::map<int, const NcclBlocked*> by;
    for (const auto& b : res.blocked) by[b.rank] = &b;
    // The first cycle of the wait-for graph, from the lowest blocked rank.
    for (const auto& b : res.blocked) {
      std::vector<int> path;
      int cur = b.rank;
      while (by.count(cur) && std::find(path.begin(), path.end(), cur) == path.end()) {
        path.push_back(cur);
        cur = by[cur]->waitsOn;
      }
      auto at = std::find(path.begin(), path.end(), cur);
      if (at != path.end()) {
        res.cycle.assign(at, path.end());
        break;
      }
    }
    // The headline names the cycle's most telling rank: a first use before an ordering clash,
    // an ordering clash before a send that waits.
    auto weight = [&](const NcclBlocked& b) {
      switch (b.rule) {
        case NcclRule::FirstBatchAllMembers:
          return 0;
        case NcclRule::LazyInit:
          return groupInit_.count(b.rank) ? 1 : 3;
        case NcclRule::CollectiveOrder:
          return 2;
        case NcclRule::CommunicatorOrder:
          return 4;
        case NcclRule::BatchTogether:
          return 5;
        case NcclRule::NoBuffering:
          return 6;
      }
      return 7;
    };
    const NcclBlocked* pick = &res.blocked.front();
    if (!res.cycle.empty()) {
      pick = by[res.cycle.front()];
      for (int r : res.cycle) {
        if (weight(*by[r]) < weight(*pick)) pick = by[r];
      }
    }
    const NcclBlocked& first = *pick;
    std::ostringstream h;
    h << "would hang on NCCL";
    if (!res.cycle.empty()) {
      h << ": cycle ";
      for (int r : res.cycle) h << "rank " << r << " -> ";
      h << "rank " << res.cycle.front();
    } else {
      h << ": " << res.blocked.size() << " rank(s) blocked";
    }
    h << " [" << toString(first.rule) << "]: " << first.brief;
    res.headline = h.str();
    if (res.headline.size() > 200) res.headline = res.headline.substr(0, 197) + "...";
    for (const auto& b : res.blocked) {
      res.details.push_back("rank " + std::to_string(b.rank) + " [" + toString(b.rule) +
                            "]: " + b.sentence);
    }
    res.fix = fixes_[first.rank];
    if (!res.fix.empty()) res.details.push_back("to complete: " + res.fix);
  }

  NcclProgram p_;  // a copy: sized to every rank it names
  const NcclReplayOptions& o_;
  std::vector<Comm> comms_;
  std::map<std::string, int> index_;
  std::vector<size_t> pc_;
  std::vector<int> joining_;
  std::vector<std::vector<char>> done_;
  std::vector<std::vector<int>> commOf_;
  std::map<int, std::string> fixes_;
  std::set<int> groupInit_;  // ranks blocked initialising a group's (not a pair's) communicator
  std::map<Channel, int> sent_, received_;
  std::vector<std::tuple<int, int, int>> recvs_;  // (rank, op, index on its channel)
};

}  // namespace

NcclReplayResult replayNccl(const NcclProgram& program, const NcclReplayOptions& opts) {
  return Replay(program, opts).run();
}

NcclVerdict ncclVerdict(const model::RunModel& run) {
  NcclVerdict v;
  // A run that recorded only some ranks, modules or iterations lacks the operations of the
  // others, and a missing operation would read as a rank that never joins: not judged.
  if (const RecordFilter filter = recordFilterOf(run); filter.any()) {
    v.kind = NcclVerdict::Kind::NothingToReplay;
    v.summary = "skipped: the record filter (" + filter.describe() +
                ") dropped operations the replay needs; replay a run recorded whole";
    return v;
  }
  NcclReplayOptions opts;
  NcclProgram p = ncclProgramOf(run, opts);
  if (p.opCount() == 0) {
    v.kind = NcclVerdict::Kind::NothingToReplay;
    v.summary = "skipped: no point-to-point operation or collective recorded";
    return v;
  }
  v.replay = replayNccl(p, opts);
  std::string unknowns;
  for (const auto& u : p.unknowns) unknowns += "; " + u;
  std::ostringstream what;
  what << p.opCount() << " operations of " << v.replay.ranks << " ranks on "
       << v.replay.communicators << " communicators; from " << p.source;
  if (v.replay.completed) {
    v.kind = NcclVerdict::Kind::Completes;
    v.summary = "every rank completes under NCCL's rules: " + what.str() +
                "; the rules: lazy communicators, no buffering" + unknowns;
    return v;
  }
  // NCCL buffers small sends in practice: a hang that needs unbuffered sends is a risk that
  // grows with the messages, not a certainty at these sizes.
  NcclReplayOptions buffered = opts;
  buffered.bufferedSendBytes = kNcclDefaultBufferBytes;
  if (replayNccl(p, buffered).completed) {
    v.kind = NcclVerdict::Kind::CompletesIfBuffered;
    v.summary =
        "completes only because NCCL buffers sends of up to 4 MiB (NCCL_BUFFSIZE), "
        "which its documented semantics do not promise" +
        std::string(p.batchesRecorded ? ""
                                      : " (or because ops it posted together were one "
                                        "batch_isend_irecv, which this file does not record)") +
        "; unbuffered, op by op, it " + v.replay.headline + unknowns;
    return v;
  }
  // stagescope's own runs are replayed from their plan with each combined action as one batch,
  // a batching the engine's Communicator does not do today (it posts the two ops one after
  // another, sends first: docs/nccl-replay.md).  A replay of that model that does not complete
  // is a finding about the model, not about the run: said, never a failure of the run.
  if (!v.replay.completed && p.fromPlan && opts.engineCombinedAsBatch) {
    v.kind = NcclVerdict::Kind::Undetermined;
    v.summary =
        "not judged: stagescope's own run replayed as the engine should post it (each "
        "combined action one batch) does not complete (" +
        v.replay.headline.substr(0, 160) +
        "); the engine posts them one op after another today (docs/nccl-replay.md)";
    return v;
  }
  if (!p.batchesRecorded) {
    // The hang may only be the unknown batching: replay the ops posted together as batches.
    NcclReplayOptions b = opts;
    b.captureCandidateBatches = true;
    NcclProgram pb = ncclProgramOf(run, b);
    if (replayNccl(pb, b).completed) {
      v.kind = NcclVerdict::Kind::Undetermined;
      v.summary = "skipped: cannot judge: replayed op by op, the job " + v.replay.headline +
                  "; it completes if the ops it posted together were one batch_isend_irecv, "
                  "which this file does not record";
      return v;
    }
  }
  v.kind = NcclVerdict::Kind::Hangs;
  v.summary = v.replay.headline;
  return v;
}

}  // namespace stagescope::analysis