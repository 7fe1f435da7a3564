#include "core/analysis/HangGraph.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/analysis/Pairing.h"
#include "core/events/FaultPhrase.h"
#include "core/events/ShapeMessage.h"
#include "core/plan/Config.h"

namespace stagescope::analysis {

using events::ActionKind;

namespace {

std::string lastDoneOf(const model::RunModel& run, int rank) {
  if (rank < 0 || rank >= static_cast<int>(run.actions.size()) || run.actions[rank].empty()) {
    return "nothing completed";
  }
  const auto& a = run.actions[rank].back();
  return "last completed: iteration " + std::to_string(a.iteration) + " " +
         events::toString(a.kind) + " mb " + std::to_string(a.microbatch);
}

// The planned actions of `rank` in `iteration` (or the plan stored once).
std::vector<const events::ActionRecord*> planOf(const model::RunModel& run, int rank,
                                                int iteration) {
  std::vector<const events::ActionRecord*> out;
  if (rank < 0 || rank >= static_cast<int>(run.plan.size())) return out;
  const auto& plan = run.plan[rank];
  const bool once = !plan.empty() && plan.front().iteration == plan.back().iteration;
  for (const auto& p : plan) {
    if (once || p.iteration == iteration) out.push_back(&p);
  }
  return out;
}

// The microbatch of the Forward/Backward nearest to position `seq` in plan order: a receive
// feeds the next compute of its kind, a send carries the previous one's output.
int computeMicrobatch(const std::vector<const events::ActionRecord*>& plan, int seq,
                      ActionKind compute, bool next) {
  if (next) {
    for (size_t k = static_cast<size_t>(std::max(seq, 0)); k < plan.size(); ++k) {
      if (plan[k]->kind == compute) return plan[k]->microbatch;
    }
  } else {
    for (int k = std::min<int>(seq, static_cast<int>(plan.size())) - 1; k >= 0; --k) {
      if (plan[static_cast<size_t>(k)]->kind == compute)
        return plan[static_cast<size_t>(k)]->microbatch;
    }
  }
  return -1;
}

// What a rank blocked in planned action `seq` waits for (a combined action blocks on its
// receive), as direction + microbatch, derived from plan order.
struct Awaited {
  bool send = false;
  events::Direction direction = events::Direction::Activation;
  int microbatch = -1;
  bool known = false;
  bool shape = false;  // the message's shape message (events/ShapeMessage.h), not the message
};

// The message one part of action `seq` of a rank's `plan` (planOf) carries: its send part
// (`send`) or its receive part, as direction + microbatch; not known when it has no such part.
Awaited partAt(const std::vector<const events::ActionRecord*>& plan, int seq, bool send) {
  if (seq < 0 || seq >= static_cast<int>(plan.size())) return {};
  const ActionKind kind = plan[static_cast<size_t>(seq)]->kind;
  const bool forward =
      send ? kind == ActionKind::SendForward || kind == ActionKind::SendForwardRecvBackward
           : kind == ActionKind::RecvForward || kind == ActionKind::SendBackwardRecvForward;
  const bool backward =
      send ? kind == ActionKind::SendBackward || kind == ActionKind::SendBackwardRecvForward
           : kind == ActionKind::RecvBackward || kind == ActionKind::SendForwardRecvBackward;
  if (!forward && !backward) return {};
  Awaited w;
  w.known = true;
  w.send = send;
  w.direction = forward ? events::Direction::Activation : events::Direction::Gradient;
  w.microbatch =
      computeMicrobatch(plan, seq, forward ? ActionKind::Forward : ActionKind::Backward, !send);
  return w;
}

// What a rank blocked in planned action `seq` waits for: its receive (a combined action blocks
// on its receive), else its send.
Awaited awaitedAt(const model::RunModel& run, int rank, int iteration, int seq) {
  const auto plan = planOf(run, rank, iteration);
  const Awaited recv = partAt(plan, seq, false);
  return recv.known ? recv : partAt(plan, seq, true);
}

// What the send part of planned action `seq` carries (for a fault injected there).
Awaited sentAt(const model::RunModel& run, int rank, int iteration, int seq) {
  return partAt(planOf(run, rank, iteration), seq, true);
}

// Sets what `e` waits for, or waits to send, from `w` exchanged with `peer`: the message
// (WaitEdge::awaited), the phrase with its peer (WaitEdge::waitsFor) and whether it is a send
// (WaitEdge::toSend), set together so that no reader cuts the phrase apart or tests how it
// begins.  An unknown message is its peer ("rank 2"), waited for.
void setAwaited(WaitEdge& e, const Awaited& w, int peer) {
  e.toSend = w.known && w.send;
  if (!w.known) {
    e.awaited = e.waitsFor = "rank " + std::to_string(peer);
    return;
  }
  e.awaited = std::string(w.shape ? "the shape of the " : "the ") + events::toString(w.direction) +
              " of microbatch " + std::to_string(w.microbatch);
  e.waitsFor = e.awaited + (w.send ? " to rank " : " from rank ") + std::to_string(peer);
}

// Where a rank is stuck when its record does not say: the first planned action after the last
// one it completed (plan order).
void stuckAction(const model::RunModel& run, int rank, int* iteration, int* seq) {
  if (rank < 0 || rank >= static_cast<int>(run.plan.size()) || run.plan[rank].empty()) return;
  const auto& plan = run.plan[rank];
  const bool once = plan.front().iteration == plan.back().iteration;
  int it = 0, next = 0;
  if (rank < static_cast<int>(run.actions.size()) && !run.actions[rank].empty()) {
    const auto& last = run.actions[rank].back();
    it = last.iteration;
    next = last.seq + 1;
  }
  int perIteration = 0;
  for (const auto& p : plan) perIteration += once || p.iteration == it;
  if (next >= perIteration) {
    ++it;
    next = 0;
  }
  *iteration = it;
  *seq = next;
}

// The edge two ranks exchange messages on (from any recorded transfer between them).
std::string edgeBetween(const model::RunModel& run, int x, int y) {
  for (const auto& t : run.transfers) {
    if ((t.srcRank == x && t.dstRank == y) || (t.srcRank == y && t.dstRank == x)) return t.edge;
  }
  return "";
}

const events::ActionRecord* plannedAt(const model::RunModel& run, int rank, int iteration,
                                      int seq) {
  int64_t i = findAction(run, rank, iteration, seq, true);
  if (i < 0 && rank >= 0 && rank < static_cast<int>(run.plan.size()) && !run.plan[rank].empty() &&
      run.plan[rank].front().iteration == run.plan[rank].back().iteration) {
    i = findAction(run, rank, run.plan[rank].front().iteration, seq, true);  // plan stored once
  }
  return i >= 0 ? &run.plan[rank][i] : nullptr;
}

// Who has not joined collective number `seq` of `group` in `iteration` that `rank` waits in:
// the members (from the waiting rank's own row of it) without a row of that collective and
// without a wait in it.  Empty when every member joined or the row is missing.
std::vector<int> notJoined(const model::RunModel& run, const events::WaitRecord& w,
                           std::string* op) {
  const events::CollectiveRecord* mine = nullptr;
  std::set<int> joined;
  for (const auto& c : run.collectives) {
    if (c.group != w.edge || c.iteration != w.iteration || c.groupSeq != w.microbatch) continue;
    joined.insert(c.rank);
    if (c.rank == w.rank) mine = &c;
  }
  for (const auto& o : run.waits) {
    if (o.op == events::WaitOp::Collective && o.edge == w.edge && o.iteration == w.iteration &&
        o.microbatch == w.microbatch) {
      joined.insert(o.rank);
    }
  }
  std::vector<int> out;
  if (!mine) return out;
  *op = mine->op;
  for (int m : mine->groupRanks) {
    if (!joined.count(m)) out.push_back(m);
  }
  return out;
}

std::string collectiveName(const std::string& op, const events::WaitRecord& w) {
  return (op.empty() ? std::string("collective") : op) + " #" + std::to_string(w.microbatch) +
         " of group " + w.edge;
}

// Whether `other`'s wait is the partner of `w`: the same message seen from the other side.
bool isPartner(const events::WaitRecord& w, const events::WaitRecord& other) {
  if (w.op == events::WaitOp::Collective) {
    return other.op == events::WaitOp::Collective && other.edge == w.edge &&
           other.iteration == w.iteration && other.microbatch == w.microbatch;
  }
  const bool opposite = (w.op == events::WaitOp::Send && other.op == events::WaitOp::Recv) ||
                        (w.op == events::WaitOp::Recv && other.op == events::WaitOp::Send);
  return opposite && other.peer == w.rank && other.edge == w.edge &&
         other.direction == w.direction && other.iteration == w.iteration &&
         other.microbatch == w.microbatch;
}

}  // namespace

bool completedLate(const model::RunModel& run, int rank, int iteration, int actionSeq) {
  for (const auto& d : run.diagnoses) {
    if (d.kind == events::DiagnosisKind::LateCompletion && d.rank == rank &&
        d.iteration == iteration && d.actionSeq == actionSeq) {
      return true;
    }
  }
  return false;
}

namespace {

std::string secondsText(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", seconds);
  return buf;
}

// Receives that gave up on a message the partner's record shows sent (a rank records a send
// once the backend took it): the wait was too short for it.
void addTooShortWaits(const model::RunModel& run, const std::map<int, WaitEdge>& waits,
                      WaitGraph& g) {
  // The receives that could have been too short, by their waiting rank; then one pass over the
  // run's transfers (millions in a large run) marks those whose message was sent.
  std::map<int, const WaitEdge*> receives;
  for (const auto& [rank, e] : waits)
    if (!e.sending && e.microbatch >= 0 && e.waitsOn >= 0) receives.emplace(rank, &e);
  std::set<int> sent;
  for (const auto& t : run.transfers) {
    if (t.side != events::Side::Send) continue;
    auto it = receives.find(t.dstRank);
    if (it == receives.end()) continue;
    const WaitEdge& e = *it->second;
    if (t.rank == e.waitsOn && t.iteration == e.iteration && t.microbatch == e.microbatch &&
        t.direction == e.direction && (e.edge.empty() || t.edge == e.edge))
      sent.insert(e.rank);
  }
  for (int rank : sent) {
    const WaitEdge& e = *receives.at(rank);
    const std::string& what = e.awaited;
    g.verdicts.push_back(
        {rank,
         "rank " + std::to_string(rank) + " gave up" +
             (e.timeoutSeconds > 0 ? " after " + secondsText(e.timeoutSeconds) : std::string()) +
             " on " + what + " that rank " + std::to_string(e.waitsOn) +
             " had sent: the timeout is shorter than the message took",
         HangCause::TimeoutTooShort,
         rank,
         {},
         ""});
  }
}

// The edge of one `waits` row: exactly what the rank waited on.
WaitEdge edgeOfWaitRow(const model::RunModel& run, const events::WaitRecord& r) {
  WaitEdge e;
  e.rank = r.rank;
  e.waitsOn = r.peer;
  e.iteration = r.iteration;
  e.actionSeq = r.actionSeq;
  e.action = events::toString(r.action);
  e.microbatch = r.microbatch;
  e.direction = r.direction;
  e.sending = r.op == events::WaitOp::Send;
  if (r.op == events::WaitOp::Broadcast) {
    e.awaited = "the boundary broadcast";
    e.waitsFor = e.awaited + " from rank " + std::to_string(r.peer);
  } else {
    setAwaited(e, {e.sending, r.direction, r.microbatch, true, events::isShapeEdge(r.edge)},
               r.peer);
  }
  e.edge = r.edge;
  e.timeoutSeconds = r.timeoutSeconds;
  if (r.op == events::WaitOp::Collective) {
    // A captured job's collective: it waits on the first member that has not joined.
    std::string op;
    const std::vector<int> missing = notJoined(run, r, &op);
    e.waitsOn = missing.empty() ? -1 : missing.front();
    e.edge.clear();
    e.waitsFor = collectiveName(op, r);
    if (!missing.empty()) {
      e.waitsFor += ", not joined by rank";
      if (missing.size() > 1) e.waitsFor += "s";
      for (size_t i = 0; i < missing.size(); ++i) {
        e.waitsFor += (i ? ", " : " ") + std::to_string(missing[i]);
      }
    } else {
      e.waitsFor += " (every member posted it)";
    }
    e.awaited = e.waitsFor;  // a collective has no one sender to name apart
  }
  e.lastDone = lastDoneOf(run, r.rank);
  return e;
}

// The edge of a timeout diagnosis (a format-1 file, no `waits` row): its fields and the planned
// action at that position.  False when it timed out before any planned action, waiting on no
// rank (the rendezvous store, set-up): not an edge of the graph; its diagnosis says what it
// waited for.
bool edgeOfTimeout(const model::RunModel& run, const events::DiagnosisRecord& d, WaitEdge* out) {
  WaitEdge e;
  e.rank = d.rank;
  e.waitsOn = d.waitsOnRank;
  e.iteration = d.iteration;
  e.actionSeq = d.actionSeq;
  if (e.iteration < 0 || e.actionSeq < 0) stuckAction(run, d.rank, &e.iteration, &e.actionSeq);
  if (e.waitsOn < 0 && e.iteration < 0) return false;
  const auto* p = plannedAt(run, d.rank, e.iteration, e.actionSeq);
  const Awaited w = awaitedAt(run, d.rank, e.iteration, e.actionSeq);
  if (p) e.action = events::toString(p->kind);
  e.microbatch = w.microbatch;
  e.direction = w.direction;
  e.sending = w.send;
  setAwaited(e, w, d.waitsOnRank);
  e.edge = edgeBetween(run, d.rank, d.waitsOnRank);
  e.lastDone = lastDoneOf(run, d.rank);
  *out = e;
  return true;
}

// Follows waits-on edges from every waiting rank: a repeated rank closes a cycle; a rank that
// waits on nobody is the missing partner.  Both become verdicts.
void addCyclesAndMissingPartners(const model::RunModel& run, std::map<int, WaitEdge>& waits,
                                 WaitGraph& g) {
  std::set<std::vector<int>> cycles;
  std::set<int> missing;
  for (const auto& start : waits) {
    std::vector<int> path;
    int at = start.first;
    while (waits.count(at) && std::find(path.begin(), path.end(), at) == path.end()) {
      path.push_back(at);
      at = waits[at].waitsOn;
    }
    if (at < 0) continue;  // waits on nobody known (a collective every member joined)
    if (waits.count(at)) {
      std::vector<int> cycle(std::find(path.begin(), path.end(), at), path.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
      cycles.insert(cycle);
    } else {
      missing.insert(at);
    }
  }
  g.cycles.assign(cycles.begin(), cycles.end());
  for (const auto& cycle : cycles) {
    std::string chain;
    for (int r : cycle) chain += "rank " + std::to_string(r) + " -> ";
    chain += "rank " + std::to_string(cycle.front());
    g.verdicts.push_back({cycle.front(),
                          "cycle " + chain + ": each rank waits for the next, none can proceed",
                          HangCause::Cycle, -1, cycle, ""});
  }
  for (int r : missing) {
    std::string why = "it waits on nobody (" + lastDoneOf(run, r) + ")";
    std::string detail;
    for (const auto& d : run.diagnoses) {
      if (d.rank == r && d.kind == events::DiagnosisKind::Error) {
        why = "it failed with an error (" + d.message + ")";
        detail = "error";
        break;
      }
      // Its own wait ran out before the schedule (rendezvous, clock alignment, a group's
      // set-up): not an edge of the graph, but why it never posted anything.
      if (d.rank == r && d.kind == events::DiagnosisKind::Timeout && !waits.count(r)) {
        const std::string said =
            d.message.size() > 120 ? d.message.substr(0, 119) + "\u2026" : d.message;
        why = "its own wait ran out before the schedule (" + said + ")";
        detail = "timeout";
      }
    }
    g.verdicts.push_back({r,
                          "rank " + std::to_string(r) + " is the missing partner: " + why +
                              " and never posted the matching operation",
                          HangCause::MissingPartner,
                          -1,
                          {},
                          detail});
  }
}

// A partner that waits on something else never posted the matching operation: names it.
void addNotPosted(const model::RunModel& run, std::map<int, WaitEdge>& waits,
                  const std::map<int, const events::WaitRecord*>& rows, WaitGraph& g) {
  for (const auto& [rank, e] : waits) {
    auto mine = rows.find(rank);
    auto theirs = rows.find(e.waitsOn);
    if (mine == rows.end() || theirs == rows.end()) continue;
    const events::WaitRecord& w = *mine->second;
    if (isPartner(w, *theirs->second)) continue;
    std::string missingOp;
    if (w.op == events::WaitOp::Collective) {
      std::string op;
      notJoined(run, w, &op);
      missingOp = "has not joined " + collectiveName(op, w) + " (iteration " +
                  std::to_string(w.iteration) + ")";
    } else if (w.op == events::WaitOp::Send || w.op == events::WaitOp::Recv) {
      const bool theySend = w.op == events::WaitOp::Recv;
      missingOp = std::string("has not posted the ") + (theySend ? "send" : "receive") +
                  (events::isShapeEdge(w.edge) ? " of the shape of the " : " of the ") +
                  events::toString(w.direction) + " of microbatch " + std::to_string(w.microbatch) +
                  (theySend ? " to rank " : " from rank ") + std::to_string(rank) + " (edge " +
                  w.edge + ", iteration " + std::to_string(w.iteration) + ")";
    } else {
      continue;
    }
    g.verdicts.push_back({e.waitsOn,
                          "rank " + std::to_string(e.waitsOn) + " " + missingOp + " that rank " +
                              std::to_string(rank) + " waits for: it " +
                              waits[e.waitsOn].waiting() + " instead",
                          HangCause::NotPosted,
                          rank,
                          {},
                          ""});
  }
}

bool hasKind(const events::InjectedFaultRecord& f, plan::FaultKind kind) {
  return std::find(f.kinds.begin(), f.kinds.end(), plan::toString(kind)) != f.kinds.end();
}

// The verdict of a fault that explains rank `waiter`'s wait `e`: a drop was never sent, a delay
// held the message past the wait, any other kind is named as the rank planted it.
HangVerdict faultVerdict(const events::InjectedFaultRecord& f, const WaitEdge& e, int waiter) {
  const std::string& what = e.awaited;
  const std::string sender = "rank " + std::to_string(e.waitsOn);
  const std::string receiver = "rank " + std::to_string(waiter);
  if (hasKind(f, plan::FaultKind::Drop))
    return {e.waitsOn,
            sender + " dropped " + what + " to " + receiver + " (fault injection): the message " +
                receiver + " waits for was never sent",
            HangCause::Fault,
            waiter,
            {},
            "drop"};
  if (hasKind(f, plan::FaultKind::Delay))
    return {e.waitsOn,
            sender + " was held by a planted " + events::faultPhrase(f) + " before sending " +
                what + " to " + receiver + ", longer than " + receiver + " waited",
            HangCause::Fault,
            waiter,
            {},
            "delay"};
  return {e.waitsOn,
          sender + " injected a fault into " + what + " to " + receiver + " (a planted " +
              events::faultPhrase(f) + ")",
          HangCause::Fault,
          waiter,
          {},
          events::faultPhrase(f)};
}

// A fault injected by the awaited rank in the same iteration, at an action that exchanges the
// awaited microbatch with the waiting rank, explains the wait.  Read from the structured
// records (RunModel::injectedFaults), never from a sentence.
void addFaultVerdicts(const model::RunModel& run, const std::map<int, WaitEdge>& waits,
                      WaitGraph& g) {
  for (const auto& [rank, e] : waits) {
    if (e.microbatch < 0) continue;
    for (const auto& f : run.injectedFaults) {
      if (f.rank != e.waitsOn || f.iteration != e.iteration) continue;
      if (f.peer >= 0 && f.peer != rank) continue;  // sent to someone else
      const Awaited sent = sentAt(run, f.rank, f.iteration, f.actionSeq);
      if (!sent.known || e.sending || sent.direction != e.direction ||
          sent.microbatch != e.microbatch) {
        continue;
      }
      g.verdicts.push_back(faultVerdict(f, e, rank));
    }
  }
}

}  // namespace

std::string WaitEdge::waiting() const {
  return (toSend ? "waits to send " : "waits for ") + waitsFor;
}

std::string WaitEdge::sentence() const {
  return "rank " + std::to_string(rank) + " " + waiting() + " (" +
         (edge.empty() ? "" : "edge " + edge + ", ") + "iteration " + std::to_string(iteration) +
         ", action " + std::to_string(actionSeq) + (action.empty() ? "" : " " + action) + ")";
}

std::string WaitGraph::cause() const {
  return verdicts.empty() ? std::string() : verdicts.front().sentence;
}

std::string WaitGraph::headline() const {
  if (verdicts.empty()) return "";
  const size_t more = verdicts.size() - 1;
  return verdicts.front().sentence +
         (more ? " (" + std::to_string(more) + " more in the wait-for graph)" : "");
}

double WaitGraph::longestWait() const {
  double t = 0;
  for (const auto& e : edges) t = std::max(t, e.timeoutSeconds);
  return t;
}

std::string WaitGraph::remedy() const {
  if (verdicts.empty()) return "";
  const HangVerdict& v = verdicts.front();
  const std::string r = "rank " + std::to_string(v.aboutRank);
  const std::string waited =
      longestWait() > 0 ? " (the waits gave up after " + secondsText(longestWait()) + ")" : "";
  switch (v.cause) {
    case HangCause::Fault:
      if (v.detail == "delay")
        return "to change: raise the timeout above the planted delay" + waited +
               ", or shorten the delay";
      return "to change: nothing in the schedule; the planted " + v.detail +
             " fault is the cause (remove it to run through)";
    case HangCause::TimeoutTooShort:
      return "to change: raise the timeout" + waited + " above what a message takes here";
    case HangCause::NotPosted:
      return "to change: make " + r + " and rank " + std::to_string(v.waiter) +
             " post their operations in one order (the plan's; `stagescope check` plan_order "
             "shows where they part)";
    case HangCause::MissingPartner:
      if (v.detail == "error") return "to change: fix " + r + "'s error; the waits follow from it";
      if (v.detail == "timeout")
        return "to change: raise the timeout" + waited + ": " + r + " gave up while starting";
      return "to change: if " + r + " was only slow, raise the timeout" + waited +
             "; else find what held it after its last completed operation";
    case HangCause::Cycle:
      return "to change: in the cycle each rank receives before it sends: post one side's send "
             "first, or post send and receive together (batch_isend_irecv)";
  }
  return "";
}

std::string WaitGraph::verdict() const {
  std::string v;
  for (const auto& h : verdicts) v += (v.empty() ? "" : "; ") + h.sentence;
  return v;
}

std::string WaitGraph::text() const {
  if (edges.empty()) return "wait-for graph: no rank recorded what it waited for";
  std::string t = "wait-for graph:";
  for (const auto& e : edges) {
    t += "\n  " + e.sentence() + "; " + e.lastDone + ".";
  }
  for (const auto& h : verdicts) t += "\n  " + h.sentence + ".";
  return t;
}

bool WaitGraph::inCycle(int rank, int waitsOn) const {
  for (const auto& cycle : cycles)
    for (size_t i = 0; i < cycle.size(); ++i)
      if (cycle[i] == rank && cycle[(i + 1) % cycle.size()] == waitsOn) return true;
  return false;
}

bool HangVerdict::concerns(int rank) const {
  return aboutRank == rank || waiter == rank ||
         std::find(cycle.begin(), cycle.end(), rank) != cycle.end();
}

WaitGraph waitForGraph(const model::RunModel& run) {
  WaitGraph g;
  std::map<int, WaitEdge> waits;
  std::map<int, const events::WaitRecord*> rows;  // the waits row behind each edge
  // The waits rows (format 2) say exactly what each rank waited on; format-1 files, which
  // have none, fall back to the timeout diagnosis's fields and the plan order below.
  for (const auto& r : run.waits) {
    if (waits.count(r.rank) || completedLate(run, r.rank, r.iteration, r.actionSeq)) continue;
    rows[r.rank] = &r;
    waits[r.rank] = edgeOfWaitRow(run, r);
  }
  for (const auto& d : run.diagnoses) {
    WaitEdge e;
    if (d.kind == events::DiagnosisKind::Timeout && !waits.count(d.rank) &&
        !completedLate(run, d.rank, d.iteration, d.actionSeq) && edgeOfTimeout(run, d, &e)) {
      waits[d.rank] = e;
    }
    if (d.kind == events::DiagnosisKind::Error && g.erroredRank < 0) {
      g.erroredRank = d.rank;
      g.error = d.message;
    }
  }
  for (const auto& [rank, e] : waits) g.edges.push_back(e);
  if (waits.empty()) return g;
  addCyclesAndMissingPartners(run, waits, g);
  addNotPosted(run, waits, rows, g);
  addTooShortWaits(run, waits, g);
  addFaultVerdicts(run, waits, g);
  // A wait a fault explains needs no second explanation ("rank 1 has not posted the send ...
  // that rank 2 waits for" after "rank 1 dropped the activation ... to rank 2").
  std::erase_if(g.verdicts, [&](const HangVerdict& v) {
    return v.cause == HangCause::NotPosted &&
           std::any_of(g.verdicts.begin(), g.verdicts.end(), [&](const HangVerdict& f) {
             return f.cause == HangCause::Fault && f.aboutRank == v.aboutRank &&
                    f.waiter == v.waiter;
           });
  });
  // Root cause first: `run`'s status line, check, the viewer's banner and the HTML report all
  // lead with it (a cycle is what the waits look like; the fault or absent partner is why).
  std::stable_sort(g.verdicts.begin(), g.verdicts.end(),
                   [](const HangVerdict& a, const HangVerdict& b) { return a.cause < b.cause; });
  return g;
}

}  // namespace stagescope::analysis
