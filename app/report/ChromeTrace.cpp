#include "app/report/ChromeTrace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "app/report/Escape.h"
#include "core/analysis/Analysis.h"
#include "core/analysis/Collectives.h"
#include "core/events/Limits.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using events::ActionKind;
using model::RunModel;
using namespace analysis;

namespace {

// A buffered writer over stdio (much faster than building a DOM for millions of events).
class Out {
 public:
  explicit Out(const std::string& path) : file_(path) { buf_.reserve(1 << 20); }
  Out& operator<<(const std::string& s) {
    buf_ += s;
    spill();
    return *this;
  }
  Out& operator<<(const char* s) {
    buf_ += s;
    spill();
    return *this;
  }
  Out& num(int64_t v) {
    char b[24];
    const auto r = std::to_chars(b, b + sizeof b, v);
    buf_.append(b, r.ptr);
    return *this;
  }
  template <typename Ints>
  Out& nums(const Ints& vs) {  // a JSON array of integers
    buf_ += '[';
    for (size_t k = 0; k < vs.size(); ++k) {
      if (k) buf_ += ',';
      num(vs[k]);
    }
    buf_ += ']';
    return *this;
  }
  Out& us(int64_t ns) {  // microseconds with ns precision: "-0.250", "12.005"
    const int64_t whole = ns / 1000, frac = ns % 1000;
    if (ns < 0 && ns > -1000) buf_ += '-';  // -0.x: the whole part alone would lose the sign
    num(whole);
    const auto f = static_cast<int>(frac < 0 ? -frac : frac);
    const char digits[4] = {'.', static_cast<char>('0' + f / 100),
                            static_cast<char>('0' + f / 10 % 10), static_cast<char>('0' + f % 10)};
    buf_.append(digits, 4);
    return *this;
  }
  Out& real(double v) {
    if (!std::isfinite(v)) {
      buf_ += std::isnan(v) ? "\"NaN\"" : (v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      return *this;
    }
    char b[40];  // as printf's %.9g (std::to_chars with a precision is defined so)
    const auto r = std::to_chars(b, b + sizeof b, v, std::chars_format::general, 9);
    buf_.append(b, r.ptr);
    return *this;
  }
  Out& str(std::string_view s) {
    buf_ += '"';
    appendJsonEscaped(buf_, s);
    buf_ += '"';
    return *this;
  }
  void event() {  // separator between events
    if (!first_) buf_ += ",\n";
    first_ = false;
  }
  void close() {  // the trace replaces `path` only now, complete (report::AtomicFile)
    flush();
    file_.commit();
  }

 private:
  void spill() {
    if (buf_.size() > (1 << 20)) flush();
  }
  void flush() {
    file_.write(buf_.data(), buf_.size());
    buf_.clear();
  }
  AtomicFile file_;
  std::string buf_;
  bool first_ = true;
};

const char* category(ActionKind k) {
  switch (k) {
    case ActionKind::Forward:
    case ActionKind::Backward:
      return "compute";
    case ActionKind::DpReduce:
    case ActionKind::OptimizerStep:
      return "optimizer";
    default:
      return "comm";
  }
}

// An action's slice on its rank's track, in ns.
struct Span {
  int64_t start = 0, end = 0;
};

// The slices of every rank's executed actions, made disjoint: a rank runs one action at a
// time, so an action recorded as starting before its predecessor ended (clock granularity)
// starts at that end instead.  Disjoint slices on one track are trivially well nested.
std::vector<std::vector<Span>> actionSpans(const RunModel& run) {
  std::vector<std::vector<Span>> out(run.actions.size());
  for (size_t r = 0; r < run.actions.size(); ++r) {
    int64_t previousEnd = INT64_MIN;
    for (const auto& a : run.actions[r]) {
      Span s{std::max(a.startNs, previousEnd), 0};
      s.end = std::max(a.endNs, s.start);
      previousEnd = s.end;
      out[r].push_back(s);
    }
  }
  return out;
}

// A point strictly inside `span` where possible (a flow binds to the slice enclosing it; at
// a shared boundary it could bind to the neighbour).
int64_t inside(const Span& span, int64_t t) {
  if (span.end - span.start < 2) return span.start;
  return std::clamp(t, span.start + 1, span.end - 1);
}

// The ends of a flow arrow: from the send's post time inside the sending action to the
// receive's completion inside the receiving action.  A receive completes after its send was
// posted, so to >= from on a common clock; when the recorded times say otherwise (clock
// offsets between hosts estimated too coarsely), the start moves to the sending action's
// beginning, and if that is still later the arrow is not drawn (false).
bool flowPoints(const Span& send, int64_t sendStart, const Span& recv, int64_t recvEnd,
                int64_t* from, int64_t* to) {
  *from = inside(send, sendStart != 0 ? sendStart : send.start);
  *to = inside(recv, recvEnd != 0 ? recvEnd : recv.end);
  if (*to < *from) *from = inside(send, send.start);
  return *to >= *from;
}

// Collectives: every member's record is a slice on a "collectives" track of its rank.  A
// rank's collectives may overlap (asynchronous all-reduces), so each goes to the first lane
// of that rank where it does not: disjoint slices per track, hence properly nested.
constexpr int kCollectiveTid = 1 << 20;  // tid = kCollectiveTid + rank * kLanes + lane
constexpr int kLanes = 16;

struct CollectiveSlice {
  size_t index = 0;  // in run.collectives
  Span span;
  int lane = 0;
};

// `endOfRun` closes the slice of a collective that never completed (pending, failed).
std::map<int, std::vector<CollectiveSlice>> collectiveSlices(const RunModel& run,
                                                             int64_t endOfRun) {
  std::map<int, std::vector<CollectiveSlice>> byRank;
  for (size_t i = 0; i < run.collectives.size(); ++i) {
    const auto& c = run.collectives[i];
    if (c.startNs == 0) continue;
    CollectiveSlice s{i, {c.startNs, c.endNs != 0 ? c.endNs : std::max(endOfRun, c.startNs)}, 0};
    s.span.end = std::max(s.span.end, s.span.start);
    byRank[c.rank].push_back(s);
  }
  for (auto& [rank, slices] : byRank) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto& a, const auto& b) { return a.span.start < b.span.start; });
    std::vector<int64_t> laneEnd;
    for (auto& s : slices) {
      size_t lane = 0;
      while (lane < laneEnd.size() && laneEnd[lane] > s.span.start) ++lane;
      if (lane == laneEnd.size()) {
        if (laneEnd.size() < static_cast<size_t>(kLanes)) {
          laneEnd.push_back(INT64_MIN);
        } else {  // more than kLanes at once: the last lane, starting where it is free
          lane = laneEnd.size() - 1;
          s.span.start = std::max(s.span.start, laneEnd[lane]);
          s.span.end = std::max(s.span.end, s.span.start);
        }
      }
      s.lane = static_cast<int>(lane);
      laneEnd[lane] = s.span.end;
    }
  }
  return byRank;
}

std::string collectiveName(const events::CollectiveRecord& c) {
  return c.op + " " + c.group + " #" + std::to_string(c.groupSeq) + " it" +
         std::to_string(c.iteration);
}

}  // namespace

ChromeTraceStats writeChromeTrace(const RunModel& run, const std::string& path) {
  ChromeTraceStats st;
  Out o(path);
  // Module -> pid.
  std::map<std::string, int> pid;
  for (size_t i = 0; i < run.info.modules.size(); ++i) {
    pid[run.info.modules[i].name] = static_cast<int>(i) + 1;
  }
  // A colocated rank keeps one track (its actions never overlap), in the process of its first
  // module; its thread name lists every module it holds and each slice names its module.
  // Memoised per rank (every event asks): a rank's pid is fixed by its first call.
  std::vector<int> pidCache;
  auto pidOf = [&](int rank) {
    if (rank >= 0 && static_cast<size_t>(rank) < pidCache.size() && pidCache[rank] > 0)
      return pidCache[rank];
    const auto* info = findRank(run, rank);
    std::string m = info ? info->module : "";
    auto it = pid.find(m);
    if (it == pid.end()) it = pid.emplace(m, static_cast<int>(pid.size()) + 1).first;
    if (rank >= 0 && rank <= events::limits::kMaxWorldSize) {
      if (static_cast<size_t>(rank) >= pidCache.size()) pidCache.resize(rank + 1, 0);
      pidCache[rank] = it->second;
    }
    return it->second;
  };
  // Times come from the read model, where the reader already put every rank on rank 0's
  // clock (RunModel::clockOffsetsApplied); nothing is subtracted here.
  int64_t t0 = INT64_MAX;
  for (const auto& list : run.actions)
    for (const auto& a : list) t0 = std::min(t0, a.startNs);
  int64_t tEnd = 0;  // the last recorded time: where a collective that never ended stops
  for (const auto& list : run.actions)
    for (const auto& a : list) tEnd = std::max(tEnd, a.endNs);
  for (const auto& c : run.collectives) {
    if (c.startNs != 0) t0 = std::min(t0, c.startNs);
    tEnd = std::max({tEnd, c.startNs, c.endNs});
  }
  if (t0 == INT64_MAX) t0 = 0;
  const std::vector<std::vector<Span>> spans = actionSpans(run);
  const auto collectives = collectiveSlices(run, tEnd);

  o << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"run_id\":";
  o.str(run.info.runId) << ",\"status\":";
  o.str(toString(run.info.status)) << ",\"status_reason\":";
  o.str(run.info.statusReason) << ",\"config_hash\":";
  o.str(run.info.configHash) << ",\"level\":";
  o.str(toString(run.info.level)) << ",\"world_size\":";
  o.num(run.info.worldSize) << "},\n\"traceEvents\":[\n";

  // Metadata: processes (modules) and threads (ranks).
  for (const auto& m : run.info.modules) {
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
    o.num(pid[m.name]) << ",\"tid\":0,\"args\":{\"name\":";
    o.str("module " + m.name + " (" + m.kind + ", tp" + std::to_string(m.tp) + " pp" +
          std::to_string(m.pp) + " dp" + std::to_string(m.dp) + ")")
        << "}}";
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
    o.num(pid[m.name]) << ",\"tid\":0,\"args\":{\"sort_index\":";
    o.num(pid[m.name]) << "}}";
    st.metadata += 2;
  }
  // One track per rank (the ranks table has a row per (rank, module): sorted by rank).
  const size_t tracks =
      std::max(run.ranks.empty() ? size_t{0} : static_cast<size_t>(run.ranks.back().rank) + 1,
               run.actions.size());
  for (size_t r = 0; r < tracks; ++r) {
    int rank = static_cast<int>(r);
    const auto* info = findRank(run, rank);
    std::string name = "rank " + std::to_string(rank);
    int sort = rank;
    if (info && run.colocated(rank)) {
      name += " shared:";
      for (const auto& m : run.modulesOf(rank)) {
        name += " " + m.module + " tp" + std::to_string(m.tp) + " pp" + std::to_string(m.pp) +
                " dp" + std::to_string(m.dp) + (m.cp ? " cp" + std::to_string(m.cp) : "") +
                " stage " + std::to_string(m.globalStage) + ";";
      }
      name += " (" + info->device + ")";
      sort = info->globalStage * 100000 + rank;
    } else if (info) {
      name += " tp" + std::to_string(info->tp) + " pp" + std::to_string(info->pp) + " dp" +
              std::to_string(info->dp);
      if (info->cp) name += " cp" + std::to_string(info->cp);
      name += " (stage " + std::to_string(info->globalStage) + ", " + info->device + ")";
      sort = info->globalStage * 100000 + rank;
    }
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
    o.num(pidOf(rank)) << ",\"tid\":";
    o.num(rank) << ",\"args\":{\"name\":";
    o.str(name) << "}}";
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":";
    o.num(pidOf(rank)) << ",\"tid\":";
    o.num(rank) << ",\"args\":{\"sort_index\":";
    o.num(sort) << "}}";
    st.metadata += 2;
  }

  // One track per rank and lane its collectives use, after the rank's own track.
  for (const auto& [rank, slices] : collectives) {
    int lanes = 0;
    for (const auto& c : slices) lanes = std::max(lanes, c.lane + 1);
    for (int lane = 0; lane < lanes; ++lane) {
      const int tid = kCollectiveTid + rank * kLanes + lane;
      const auto* info = findRank(run, rank);
      o.event();
      o << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
      o.num(pidOf(rank)) << ",\"tid\":";
      o.num(tid) << ",\"args\":{\"name\":";
      o.str("rank " + std::to_string(rank) + " collectives" +
            (lane ? " (" + std::to_string(lane + 1) + ")" : ""))
          << "}}";
      o.event();
      o << "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":";
      o.num(pidOf(rank)) << ",\"tid\":";
      o.num(tid) << ",\"args\":{\"sort_index\":";
      o.num((info ? info->globalStage * 100000 + rank : rank) * 32 + 1 + lane) << "}}";
      st.metadata += 2;
    }
  }

  // Actions: X slices on their rank's track, disjoint by construction (actionSpans).
  for (size_t r = 0; r < run.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    const int p = pidOf(rank);
    const bool shared = run.colocated(rank);
    for (size_t i = 0; i < run.actions[r].size(); ++i) {
      const auto& a = run.actions[r][i];
      const Span& sp = spans[r][i];
      std::string name = toString(a.kind);
      if (a.microbatch >= 0) name += " mb" + std::to_string(a.microbatch);
      if (shared && !a.module.empty()) name += " [" + a.module + "]";
      o.event();
      o << "{\"ph\":\"X\",\"cat\":\"";
      o << category(a.kind) << "\",\"name\":";
      o.str(name) << ",\"pid\":";
      o.num(p) << ",\"tid\":";
      o.num(rank) << ",\"ts\":";
      o.us(sp.start - t0) << ",\"dur\":";
      o.us(sp.end - sp.start) << ",\"args\":{\"iteration\":";
      o.num(a.iteration) << ",\"seq\":";
      o.num(a.seq) << ",\"microbatch\":";
      o.num(a.microbatch) << ",\"module\":";
      o.str(a.module) << ",\"stage\":";
      o.num(a.stage) << ",\"peers\":";
      o.nums(a.peers) << "}}";
      ++st.slices;
    }
  }

  // Transfers: asynchronous slices ("b"/"e", id = position in run.transfers + 1), which
  // Perfetto lays out on their own tracks: a send or receive may outlive the action that
  // posted it and overlap others, which a thread track cannot show.
  const analysis::ActionIndex actionIndex(run);  // findAction's answers, without a rank-wide search
  auto spanOfAction = [&](const events::TransferRecord& t) -> const Span* {
    const int64_t ai = actionIndex.find(t.rank, t.iteration, t.actionSeq);
    return ai >= 0 ? &spans[static_cast<size_t>(t.rank)][static_cast<size_t>(ai)] : nullptr;
  };
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    const auto& t = run.transfers[i];
    const Span* action = spanOfAction(t);
    int64_t s = t.startNs, e = t.endNs;
    if (s == 0 && e == 0) {
      if (!action) continue;  // no time recorded and no action to place it in
      s = action->start;
      e = action->end;
    }
    e = std::max(e, s);
    const std::string name = std::string(t.side == events::Side::Send ? "send " : "recv ") +
                             (t.direction == events::Direction::Activation ? "act " : "grad ") +
                             t.edge + " mb" + std::to_string(t.microbatch) +
                             (model::isLocalHandOff(t) ? " (local)" : "");
    const char* cat = t.side == events::Side::Send ? "send" : "recv";
    o.event();
    o << "{\"ph\":\"b\",\"cat\":\"" << cat << "\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(t.rank)) << ",\"tid\":";
    o.num(t.rank) << ",\"ts\":";
    o.us(s - t0) << ",\"args\":{\"edge\":";
    o.str(t.edge) << ",\"direction\":";
    o.str(toString(t.direction)) << ",\"src\":";
    o.num(t.srcRank) << ",\"dst\":";
    o.num(t.dstRank) << ",\"iteration\":";
    o.num(t.iteration) << ",\"microbatch\":";
    o.num(t.microbatch) << ",\"action_seq\":";
    o.num(t.actionSeq) << ",\"shape\":";
    o.str(formatShape(t.shape)) << ",\"dtype\":";
    o.str(t.dtype) << ",\"bytes\":";
    o.num(t.bytes) << ",\"checksum\":";
    o.str(formatChecksum(t.checksum));
    if (model::isLocalHandOff(t)) o << ",\"local\":true";  // between two modules of one rank
    if (t.hasStats) {
      o << ",\"min\":";
      o.real(t.stats.min) << ",\"max\":";
      o.real(t.stats.max) << ",\"mean\":";
      o.real(t.stats.mean) << ",\"l2\":";
      o.real(t.stats.l2) << ",\"nan\":";
      o.num(t.stats.nanCount) << ",\"inf\":";
      o.num(t.stats.infCount);
    }
    o << "}}";
    o.event();
    o << "{\"ph\":\"e\",\"cat\":\"" << cat << "\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(t.rank)) << ",\"tid\":";
    o.num(t.rank) << ",\"ts\":";
    o.us(e - t0) << "}";
    ++st.transfers;
  }

  // Flows: one arrow per send/recv pair, from inside the sending action (when the send was
  // posted) to inside the receiving action (when the receive completed); flowPoints keeps
  // the arrow's end at or after its start.
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[static_cast<size_t>(p.send)];
    const auto& v = run.transfers[static_cast<size_t>(p.recv)];
    const Span* sa = spanOfAction(s);
    const Span* va = spanOfAction(v);
    int64_t from = 0, to = 0;
    if (!sa || !va || !flowPoints(*sa, s.startNs, *va, v.endNs, &from, &to)) {
      ++st.flowsSkipped;
      continue;
    }
    const std::string name =
        s.edge + " " + (s.direction == events::Direction::Activation ? "act" : "grad");
    o.event();
    o << "{\"ph\":\"s\",\"cat\":\"p2p\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(s.rank)) << ",\"tid\":";
    o.num(s.rank) << ",\"ts\":";
    o.us(from - t0) << "}";
    o.event();
    o << "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"p2p\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(v.rank)) << ",\"tid\":";
    o.num(v.rank) << ",\"ts\":";
    o.us(to - t0) << "}";
    ++st.flows;
  }

  // Collectives: one X slice per member (cat "collective") with what was reduced/gathered;
  // the members of one instance (analysis::collectiveInstances) are linked by flow arrows
  // from each member to the next in rank order, at the moment the last one joined (clamped
  // inside each slice; a link whose ends contradict that is counted, not drawn).
  const auto instances = analysis::collectiveInstances(run);
  std::vector<const CollectiveSlice*> sliceOf(run.collectives.size(), nullptr);
  std::vector<const analysis::CollectiveInstance*> instanceOf(run.collectives.size(), nullptr);
  for (const auto& [rank, slices] : collectives)
    for (const auto& cs : slices) sliceOf[cs.index] = &cs;
  for (const auto& inst : instances)
    for (size_t m : inst.members) instanceOf[m] = &inst;
  for (const auto& [rank, slices] : collectives) {
    for (const auto& cs : slices) {
      const auto& c = run.collectives[cs.index];
      const auto* inst = instanceOf[cs.index];
      o.event();
      o << "{\"ph\":\"X\",\"cat\":\"collective\",\"name\":";
      o.str(collectiveName(c)) << ",\"pid\":";
      o.num(pidOf(c.rank)) << ",\"tid\":";
      o.num(kCollectiveTid + c.rank * kLanes + cs.lane) << ",\"ts\":";
      o.us(cs.span.start - t0) << ",\"dur\":";
      o.us(cs.span.end - cs.span.start) << ",\"args\":{\"op\":";
      o.str(c.op) << ",\"group\":";
      o.str(c.group) << ",\"group_rank\":";
      o.num(c.groupRank) << ",\"group_size\":";
      o.num(c.groupSize) << ",\"group_ranks\":";
      o.nums(c.groupRanks) << ",\"root\":";
      o.num(c.root) << ",\"reduce_op\":";
      o.str(c.reduceOp) << ",\"iteration\":";
      o.num(c.iteration) << ",\"group_seq\":";
      o.num(c.groupSeq) << ",\"shape\":";
      o.str(formatShape(c.shape)) << ",\"dtype\":";
      o.str(c.dtype) << ",\"bytes\":";
      o.num(c.bytes) << ",\"in_checksum\":";
      o.str(formatChecksum(c.inChecksum)) << ",\"out_checksum\":";
      o.str(formatChecksum(c.outChecksum)) << ",\"state\":";
      o.str(c.state) << ",\"members_recorded\":";
      o.num(inst ? static_cast<int64_t>(inst->members.size()) : 1) << ",\"agreement\":";
      o.str(inst ? toString(inst->agreement) : "") << "}}";
      ++st.collectives;
    }
  }
  int64_t flowId = static_cast<int64_t>(pairs.size());
  for (const auto& inst : instances) {
    std::vector<const CollectiveSlice*> members;  // by rank (CollectiveInstance::members)
    for (size_t m : inst.members)
      if (sliceOf[m]) members.push_back(sliceOf[m]);
    int64_t joined = INT64_MIN;
    for (const auto* m : members) joined = std::max(joined, m->span.start);
    for (size_t k = 0; k + 1 < members.size(); ++k) {
      const auto& a = *members[k];
      const auto& b = *members[k + 1];
      const int64_t from = inside(a.span, joined);
      int64_t to = inside(b.span, joined);
      if (to < from) to = inside(b.span, from);  // `joined` was a's own start, moved 1 ns in

      if (to < from) {
        ++st.collectiveLinksSkipped;
        continue;
      }
      const auto& ca = run.collectives[a.index];
      const auto& cb = run.collectives[b.index];
      ++flowId;
      o.event();
      o << "{\"ph\":\"s\",\"cat\":\"collective\",\"name\":";
      o.str(collectiveName(ca)) << ",\"id\":";
      o.num(flowId) << ",\"pid\":";
      o.num(pidOf(ca.rank)) << ",\"tid\":";
      o.num(kCollectiveTid + ca.rank * kLanes + a.lane) << ",\"ts\":";
      o.us(from - t0) << "}";
      o.event();
      o << "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"collective\",\"name\":";
      o.str(collectiveName(ca)) << ",\"id\":";
      o.num(flowId) << ",\"pid\":";
      o.num(pidOf(cb.rank)) << ",\"tid\":";
      o.num(kCollectiveTid + cb.rank * kLanes + b.lane) << ",\"ts\":";
      o.us(to - t0) << "}";
      ++st.collectiveLinks;
    }
  }

  // Diagnoses as global instants.
  for (const auto& d : run.diagnoses) {
    o.event();
    o << "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"diagnosis\",\"name\":";
    o.str(d.kind + (d.rank >= 0 ? " rank " + std::to_string(d.rank) : "")) << ",\"pid\":";
    o.num(d.rank >= 0 ? pidOf(d.rank) : 0) << ",\"tid\":";
    o.num(std::max(d.rank, 0)) << ",\"ts\":";
    o.us(d.timeNs ? d.timeNs - t0 : 0) << ",\"args\":{\"message\":";
    o.str(d.message) << ",\"waits_on_rank\":";
    o.num(d.waitsOnRank) << ",\"iteration\":";
    o.num(d.iteration) << ",\"action_seq\":";
    o.num(d.actionSeq) << "}}";
  }
  o << "\n]}\n";
  o.close();
  return st;
}

}  // namespace stagescope::report
