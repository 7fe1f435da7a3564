#include "app/report/ChromeTrace.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "app/report/TraceContext.h"
#include "app/report/TraceEventWriter.h"
#include "core/analysis/Analysis.h"
#include "core/analysis/Collectives.h"

namespace stagescope::report {

using events::ActionKind;
using model::RunModel;
using namespace analysis;

namespace {

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

std::string collectiveName(const events::CollectiveRecord& c) {
  return c.op + " " + c.group + " #" + std::to_string(c.groupSeq) + " it" +
         std::to_string(c.iteration);
}

int64_t collectiveTid(int rank, int lane) {
  return kCollectiveTid + static_cast<int64_t>(rank) * kLanes + lane;
}

// A track's name and sort position: two metadata events, `kind` "process" or "thread".
void trackMetadata(TraceOut& o, const std::string& kind, int64_t pid, int64_t tid,
                   const std::string& name, int64_t sort, ChromeTraceStats& st) {
  const std::string nameKey = kind + "_name", sortKey = kind + "_sort_index";
  writeEvent(o, {.ph = "M", .name = nameKey, .pid = pid, .tid = tid}, [&](TraceOut& a) {
    a << "\"name\":";
    a.str(name);
  });
  writeEvent(o, {.ph = "M", .name = sortKey, .pid = pid, .tid = tid}, [&](TraceOut& a) {
    a << "\"sort_index\":";
    a.num(sort);
  });
  st.metadata += 2;
}

// A flow arrow: its start ("s") and its end ("f", bound to the enclosing slice).
struct FlowEnd {
  int64_t pid, tid, tsNs;
};
void flow(TraceOut& o, const char* cat, const std::string& name, int64_t id, FlowEnd from,
          FlowEnd to) {
  writeEvent(o, {.ph = "s",
                 .cat = cat,
                 .name = name,
                 .id = id,
                 .pid = from.pid,
                 .tid = from.tid,
                 .tsNs = from.tsNs});
  writeEvent(o, {.ph = "f",
                 .cat = cat,
                 .name = name,
                 .id = id,
                 .pid = to.pid,
                 .tid = to.tid,
                 .tsNs = to.tsNs});
}

// The run's identity, before the events.
void writeHeader(TraceOut& o, const RunModel& run) {
  o << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"run_id\":";
  o.str(run.info.runId) << ",\"status\":";
  o.str(toString(run.info.status)) << ",\"status_reason\":";
  o.str(run.info.statusReason) << ",\"config_hash\":";
  o.str(run.info.configHash) << ",\"level\":";
  o.str(toString(run.info.level)) << ",\"world_size\":";
  o.num(run.info.worldSize) << "},\n\"traceEvents\":[\n";
}

// One process per module, named with its kind and grid.
void writeProcessTracks(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  for (const auto& m : cx.run.info.modules) {
    const int pid = cx.pids.ofModule(m.name);
    trackMetadata(o, "process", pid, 0,
                  "module " + m.name + " (" + m.kind + ", tp" + std::to_string(m.tp) + " pp" +
                      std::to_string(m.pp) + " dp" + std::to_string(m.dp) + ")",
                  pid, st);
  }
}

// A rank's track name ("rank 3 tp0 pp1 dp0 (stage 1, cpu)"; a colocated rank lists each
// module it holds) and its sort position (by global stage, then rank).
std::string rankTrackName(const RunModel& run, int rank, int64_t* sort) {
  const auto* info = findRank(run, rank);
  std::string name = "rank " + std::to_string(rank);
  *sort = rank;
  if (!info) return name;
  *sort = info->globalStage * 100000 + rank;
  if (run.colocated(rank)) {
    name += " shared:";
    for (const auto& m : run.modulesOf(rank)) {
      name += " " + m.module + " tp" + std::to_string(m.tp) + " pp" + std::to_string(m.pp) + " dp" +
              std::to_string(m.dp) + (m.cp ? " cp" + std::to_string(m.cp) : "") + " stage " +
              std::to_string(m.globalStage) + ";";
    }
    return name + " (" + info->device + ")";
  }
  name += " tp" + std::to_string(info->tp) + " pp" + std::to_string(info->pp) + " dp" +
          std::to_string(info->dp);
  if (info->cp) name += " cp" + std::to_string(info->cp);
  return name + " (stage " + std::to_string(info->globalStage) + ", " + info->device + ")";
}

// One thread track per rank (the ranks table has a row per (rank, module): sorted by rank).
void writeRankTracks(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  const auto& run = cx.run;
  const size_t tracks =
      std::max(run.ranks.empty() ? size_t{0} : static_cast<size_t>(run.ranks.back().rank) + 1,
               run.actions.size());
  for (size_t r = 0; r < tracks; ++r) {
    const int rank = static_cast<int>(r);
    int64_t sort = 0;
    const std::string name = rankTrackName(run, rank, &sort);
    trackMetadata(o, "thread", cx.pids.ofRank(rank), rank, name, sort, st);
  }
}

// One track per rank and lane its collectives use, sorted after the rank's own track.
void writeCollectiveTracks(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  for (const auto& [rank, slices] : cx.collectives) {
    int lanes = 0;
    for (const auto& c : slices) lanes = std::max(lanes, c.lane + 1);
    const auto* info = findRank(cx.run, rank);
    for (int lane = 0; lane < lanes; ++lane) {
      trackMetadata(o, "thread", cx.pids.ofRank(rank), collectiveTid(rank, lane),
                    "rank " + std::to_string(rank) + " collectives" +
                        (lane ? " (" + std::to_string(lane + 1) + ")" : ""),
                    (info ? info->globalStage * 100000 + rank : rank) * 32 + 1 + lane, st);
    }
  }
}

// Actions: X slices on their rank's track, disjoint by construction (actionSpans), named like
// the plan ("F mb3"; a colocated rank's slices name their module).
void writeActions(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  const auto& run = cx.run;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    const int pid = cx.pids.ofRank(rank);
    const bool shared = run.colocated(rank);
    for (size_t i = 0; i < run.actions[r].size(); ++i) {
      const auto& a = run.actions[r][i];
      const Span& sp = cx.spans[r][i];
      std::string name = toString(a.kind);
      if (a.microbatch >= 0) name += " mb" + std::to_string(a.microbatch);
      if (shared && !a.module.empty()) name += " [" + a.module + "]";
      writeEvent(o,
                 {.ph = "X",
                  .cat = category(a.kind),
                  .name = name,
                  .pid = pid,
                  .tid = rank,
                  .tsNs = sp.start - cx.t0,
                  .durNs = sp.end - sp.start},
                 [&](TraceOut& args) {
                   args << "\"iteration\":";
                   args.num(a.iteration) << ",\"seq\":";
                   args.num(a.seq) << ",\"microbatch\":";
                   args.num(a.microbatch) << ",\"module\":";
                   args.str(a.module) << ",\"stage\":";
                   args.num(a.stage) << ",\"peers\":";
                   args.nums(a.peers);
                 });
      ++st.slices;
    }
  }
}

// What a transfer carried: the args of its async slice.
void transferArgs(TraceOut& o, const events::TransferRecord& t) {
  o << "\"edge\":";
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
}

// Transfers: asynchronous slices ("b"/"e", id = position in run.transfers + 1), which
// Perfetto lays out on their own tracks: a send or receive may outlive the action that
// posted it and overlap others, which a thread track cannot show.  One without a recorded
// time lasts as long as its action; one with neither is left out.
void writeTransfers(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  const auto& run = cx.run;
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    const auto& t = run.transfers[i];
    const Span* action = cx.spanOfAction(t);
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
    TraceEvent ev{.ph = "b",
                  .cat = t.side == events::Side::Send ? "send" : "recv",
                  .name = name,
                  .id = static_cast<int64_t>(i) + 1,
                  .pid = cx.pids.ofRank(t.rank),
                  .tid = t.rank,
                  .tsNs = s - cx.t0};
    writeEvent(o, ev, [&](TraceOut& args) { transferArgs(args, t); });
    ev.ph = "e";
    ev.tsNs = e - cx.t0;
    writeEvent(o, ev);
    ++st.transfers;
  }
}

// Flows: one arrow per send/recv pair, from inside the sending action (when the send was
// posted) to inside the receiving action (when the receive completed); flowPoints keeps the
// arrow's end at or after its start.  Ids are the pair's index + 1.  Returns the pair count
// (the collective links' ids follow).
size_t writeTransferFlows(TraceOut& o, TraceContext& cx, ChromeTraceStats& st) {
  const auto& run = cx.run;
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[static_cast<size_t>(p.send)];
    const auto& v = run.transfers[static_cast<size_t>(p.recv)];
    const Span* sa = cx.spanOfAction(s);
    const Span* va = cx.spanOfAction(v);
    int64_t from = 0, to = 0;
    if (!sa || !va || !flowPoints(*sa, s.startNs, *va, v.endNs, &from, &to)) {
      ++st.flowsSkipped;
      continue;
    }
    const std::string name =
        s.edge + " " + (s.direction == events::Direction::Activation ? "act" : "grad");
    flow(o, "p2p", name, static_cast<int64_t>(i) + 1,
         {cx.pids.ofRank(s.rank), s.rank, from - cx.t0},
         {cx.pids.ofRank(v.rank), v.rank, to - cx.t0});
    ++st.flows;
  }
  return pairs.size();
}

// What one member of a collective did: the args of its slice.
void collectiveArgs(TraceOut& o, const events::CollectiveRecord& c,
                    const CollectiveInstance* inst) {
  o << "\"op\":";
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
  o.str(inst ? toString(inst->agreement) : "");
}

// Collectives: one X slice per member (cat "collective") on its rank's collective lane.
void writeCollectiveSlices(TraceOut& o, TraceContext& cx,
                           const std::vector<const CollectiveInstance*>& instanceOf,
                           ChromeTraceStats& st) {
  for (const auto& [rank, slices] : cx.collectives) {
    for (const auto& cs : slices) {
      const auto& c = cx.run.collectives[cs.index];
      writeEvent(o,
                 {.ph = "X",
                  .cat = "collective",
                  .name = collectiveName(c),
                  .pid = cx.pids.ofRank(c.rank),
                  .tid = collectiveTid(c.rank, cs.lane),
                  .tsNs = cs.span.start - cx.t0,
                  .durNs = cs.span.end - cs.span.start},
                 [&](TraceOut& args) { collectiveArgs(args, c, instanceOf[cs.index]); });
      ++st.collectives;
    }
  }
}

// The members of one instance (analysis::collectiveInstances) linked by flow arrows from each
// member to the next in rank order, at the moment the last one joined (clamped inside each
// slice; a link whose ends contradict that is counted, not drawn).  Ids follow `firstId`.
void writeCollectiveLinks(TraceOut& o, TraceContext& cx,
                          const std::vector<CollectiveInstance>& instances,
                          const std::vector<const CollectiveSlice*>& sliceOf, int64_t firstId,
                          ChromeTraceStats& st) {
  int64_t flowId = firstId;
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
      const auto& ca = cx.run.collectives[a.index];
      const auto& cb = cx.run.collectives[b.index];
      flow(o, "collective", collectiveName(ca), ++flowId,
           {cx.pids.ofRank(ca.rank), collectiveTid(ca.rank, a.lane), from - cx.t0},
           {cx.pids.ofRank(cb.rank), collectiveTid(cb.rank, b.lane), to - cx.t0});
      ++st.collectiveLinks;
    }
  }
}

// Collectives: the members' slices, then the links between the members of each instance.
void writeCollectives(TraceOut& o, TraceContext& cx, int64_t firstLinkId, ChromeTraceStats& st) {
  const auto instances = collectiveInstances(cx.run);
  std::vector<const CollectiveSlice*> sliceOf(cx.run.collectives.size(), nullptr);
  std::vector<const CollectiveInstance*> instanceOf(cx.run.collectives.size(), nullptr);
  for (const auto& [rank, slices] : cx.collectives)
    for (const auto& cs : slices) sliceOf[cs.index] = &cs;
  for (const auto& inst : instances)
    for (size_t m : inst.members) instanceOf[m] = &inst;
  writeCollectiveSlices(o, cx, instanceOf, st);
  writeCollectiveLinks(o, cx, instances, sliceOf, firstLinkId, st);
}

// Diagnoses (a hang's wait-for cycle, ...) as global instants.
void writeDiagnoses(TraceOut& o, TraceContext& cx) {
  for (const auto& d : cx.run.diagnoses) {
    writeEvent(o,
               {.ph = "i",
                .cat = "diagnosis",
                .name = d.kindName() + (d.rank >= 0 ? " rank " + std::to_string(d.rank) : ""),
                .pid = d.rank >= 0 ? cx.pids.ofRank(d.rank) : 0,
                .tid = std::max(d.rank, 0),
                .tsNs = d.timeNs ? d.timeNs - cx.t0 : 0},
               [&](TraceOut& args) {
                 args << "\"message\":";
                 args.str(d.message) << ",\"waits_on_rank\":";
                 args.num(d.waitsOnRank) << ",\"iteration\":";
                 args.num(d.iteration) << ",\"action_seq\":";
                 args.num(d.actionSeq);
               });
  }
}

}  // namespace

ChromeTraceStats writeChromeTrace(const RunModel& run, const std::string& path) {
  ChromeTraceStats st;
  TraceOut o(path);
  TraceContext cx(run);
  writeHeader(o, run);
  writeProcessTracks(o, cx, st);
  writeRankTracks(o, cx, st);
  writeCollectiveTracks(o, cx, st);
  writeActions(o, cx, st);
  writeTransfers(o, cx, st);
  const size_t pairs = writeTransferFlows(o, cx, st);
  writeCollectives(o, cx, static_cast<int64_t>(pairs), st);
  writeDiagnoses(o, cx);
  o << "\n]}\n";
  o.close();
  return st;
}

}  // namespace stagescope::report
