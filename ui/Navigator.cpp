// The view's movements (Navigator.h).
#include "ui/Navigator.h"

#include <algorithm>

#include "core/events/CapturedLayout.h"

namespace stagescope::ui {

Navigator::Navigator(ViewerState& view, const RunSlot& main, const RunSlot& other)
    : view_(view), main_(main), other_(other) {}

const analysis::Comparison* Navigator::comparison() const {
  return other_.comparedWith == main_.run ? other_.comparison.get() : nullptr;
}

void Navigator::showTab(BottomTab tab) {
  view_.tab = tab;
  view_.tabRequested = true;
}

void Navigator::zoomFit() {
  if (!main_.run) return;
  const auto& m = main_.run->model;
  double pad = std::max<double>(1000, 0.01 * static_cast<double>(m.maxTimeNs - m.minTimeNs));
  view_.viewStart = static_cast<double>(m.minTimeNs) - pad;
  view_.viewEnd = static_cast<double>(m.maxTimeNs) + pad;
  view_.fitPending = false;
}

// A captured job spends its first part starting up: ranks that come up late, rendezvous and
// setup collectives, receives posted long before anything is sent (most of a short run),
// which squeezed the pipeline schedule into a sliver at the right edge.  It opens from its
// first send on; the start-up is one F (zoom to fit) away.  A recorded run, whose schedule
// starts at once, opens whole.
void Navigator::zoomOpening() {
  zoomFit();
  const LoadedRun* r = main_.run.get();
  if (!r || !r->model.info.captured()) return;
  const auto& m = r->model;
  int64_t first = m.maxTimeNs;
  for (const auto& t : m.transfers)
    if (t.side == events::Side::Send) first = std::min(first, t.startNs);
  const double whole = static_cast<double>(m.maxTimeNs - m.minTimeNs);
  const double schedule = static_cast<double>(m.maxTimeNs - first);
  if (schedule <= 0 || schedule > 0.9 * whole) return;  // the start-up is short: show it all
  const double pad = std::max(1000.0, 0.02 * schedule);
  view_.viewStart = static_cast<double>(first) - pad;
  view_.viewEnd = static_cast<double>(m.maxTimeNs) + pad;
}

void Navigator::zoomTo(double t0, double t1) {
  if (t1 - t0 < 100) {
    double mid = 0.5 * (t0 + t1);
    t0 = mid - 50;
    t1 = mid + 50;
  }
  view_.viewStart = t0;
  view_.viewEnd = t1;
}

void Navigator::focusAction(int rank, int64_t action) {
  const LoadedRun* r = main_.run.get();
  if (!r || rank < 0 || rank >= static_cast<int>(r->model.actions.size())) return;
  const auto& acts = r->model.actions[rank];
  if (action < 0 || action >= static_cast<int64_t>(acts.size())) return;
  const auto& a = acts[action];
  double span = view_.viewEnd - view_.viewStart;
  double d = static_cast<double>(a.endNs - a.startNs);
  if (span > 60 * d + 5e6 || span < 2 * d) span = std::max(20 * d, 4e6);
  double mid = 0.5 * static_cast<double>(a.startNs + a.endNs);
  zoomTo(mid - span / 2, mid + span / 2);
}

void Navigator::select(const Selection& s, bool navigate) {
  view_.selection = s;
  const LoadedRun* r = main_.run.get();
  if (!r || !navigate) return;
  if (s.kind == Selection::Kind::Action)
    focusAction(s.rank, s.index);
  else if (s.kind == Selection::Kind::Transfer)
    focusTransfer(s.index, true);
  else if (s.kind == Selection::Kind::Collective)
    focusCollective(s.index);
}

void Navigator::focusTransfer(int64_t index, bool step) {
  const LoadedRun* r = main_.run.get();
  if (!r || index < 0 || index >= static_cast<int64_t>(r->transferPair.size())) return;
  const int32_t pair = r->transferPair[index];
  if (pair < 0) return;
  const PairActions& pa = r->pairActions[pair];
  const auto& acts = r->model.actions;
  if (pa.sendAction < 0 && pa.recvAction < 0) return;
  const events::ActionRecord& first =
      pa.sendAction >= 0 ? acts[pa.sendRank][pa.sendAction] : acts[pa.recvRank][pa.recvAction];
  const events::ActionRecord& second =
      pa.recvAction >= 0 ? acts[pa.recvRank][pa.recvAction] : first;
  double t0 = static_cast<double>(std::min(first.startNs, second.startNs));
  double t1 = static_cast<double>(std::max(first.endNs, second.endNs));
  double pad = std::max(2e6, (t1 - t0) * 3);
  zoomTo(t0 - pad, t1 + pad);
  if (step && pa.recvAction >= 0)
    stepTo(r->replay.positionOf(pa.recvRank, pa.recvAction, false) + 1);
}

void Navigator::stepTo(int64_t step) {
  const LoadedRun* r = main_.run.get();
  if (!r) return;
  view_.step = std::clamp<int64_t>(step, 0, static_cast<int64_t>(r->replay.size()));
  if (view_.followReplay && view_.step > 0) {
    const ReplayStep& st = r->replay.steps()[view_.step - 1];
    const auto& a = r->model.actions[st.rank][st.action];
    double t = static_cast<double>(st.end ? a.endNs : a.startNs);
    double span = view_.viewEnd - view_.viewStart;
    if (t < view_.viewStart + span * 0.1 || t > view_.viewEnd - span * 0.1)
      zoomTo(t - span * 0.5, t + span * 0.5);
  }
}

void Navigator::advancePlayback(float dt) {
  if (!view_.playing || !main_.run) return;
  view_.playAccumulator += static_cast<double>(dt) * view_.speed;
  int64_t n = static_cast<int64_t>(view_.playAccumulator);
  if (n > 0) {
    view_.playAccumulator -= static_cast<double>(n);
    stepTo(view_.step + n);
    if (view_.step >= static_cast<int64_t>(main_.run->replay.size())) view_.playing = false;
  }
}

bool Navigator::showNonFinite() {
  const LoadedRun* r = main_.run.get();
  if (!r) return false;
  const NonFinite& n = r->problems.firstNonFinite;
  switch (n.kind) {
    case NonFinite::Kind::None:
      return false;
    case NonFinite::Kind::Transfer:
      select({Selection::Kind::Transfer, n.rank, n.index}, false);
      focusTransfer(n.index, false);  // the replay stays where it is (the end when opening)
      break;
    case NonFinite::Kind::Gradient:
      select({Selection::Kind::Gradient, n.rank, n.index}, false);
      if (n.action >= 0) focusAction(n.rank, n.action);
      break;
    case NonFinite::Kind::Loss:
      select({Selection::Kind::Loss, n.rank, n.index}, false);
      if (n.action >= 0) focusAction(n.rank, n.action);
      break;
  }
  return true;
}

bool Navigator::showStuck() {
  const LoadedRun* r = main_.run.get();
  if (!r || r->problems.firstStuckRank < 0) return false;
  const int rank = r->problems.firstStuckRank;
  const auto& acts = r->model.actions[rank];
  // Stuck actions are drawn after each rank's last completed one: select the root's (the
  // inspector explains it) and show where every rank of the wait-for graph got stuck.
  select({Selection::Kind::Stuck, rank, -1}, false);
  if (!acts.empty()) {
    double t0 = static_cast<double>(acts.back().startNs);
    for (const WaitEdge& w : r->problems.waits)
      for (int k : {w.rank, w.waitsOn})
        if (!r->model.actions[k].empty())
          t0 = std::min(t0, static_cast<double>(r->model.actions[k].back().endNs));
    const double t1 = static_cast<double>(r->model.maxTimeNs);
    const double pad = std::max(1e6, 0.08 * (t1 - t0));
    zoomTo(t0 - pad, t1 + 2 * pad);
  }
  showTab(BottomTab::GridMap);
  return true;
}

bool Navigator::showDivergence() {
  const analysis::Comparison* c = comparison();
  const LoadedRun* r = main_.run.get();
  if (!c || !c->first || !r) return false;
  const analysis::AlignedItem& it = *c->first;
  if (it.a < 0) return false;  // only in B: nothing of run A to show
  switch (it.kind) {
    case analysis::ItemKind::Transfer:
      select({Selection::Kind::Transfer, r->model.transfers[it.a].rank, it.a}, false);
      focusTransfer(it.a, false);
      break;
    case analysis::ItemKind::Gradient:
      select({Selection::Kind::Gradient, r->model.gradients[it.a].rank, it.a}, false);
      break;
    case analysis::ItemKind::Loss:
      select({Selection::Kind::Loss, r->model.losses[it.a].rank, it.a}, false);
      break;
    case analysis::ItemKind::Input:
      break;  // inputs have no selection of their own: the compare tab names the sample
  }
  showTab(BottomTab::Compare);
  return true;
}

void Navigator::showFirstProblem() {
  const LoadedRun* r = main_.run.get();
  if (r && r->problems.corruptMessages > 0) {  // corruption comes before the NaNs it causes
    const int64_t t = r->problems.firstCorruptTransfer;
    select({Selection::Kind::Transfer, r->model.transfers[t].rank, t}, false);
    focusTransfer(t, false);
    return;
  }
  if (!showNonFinite()) showStuck();
}

void Navigator::focusCollective(int64_t index) {
  const LoadedRun* run = main_.run.get();
  if (!run || index < 0 || index >= static_cast<int64_t>(run->collectives.instances.size())) return;
  const auto& c = run->collectives.instances[static_cast<size_t>(index)];
  const double t0 = static_cast<double>(c.firstStartNs);
  const double t1 = static_cast<double>(run->collectives.endOf(c));
  const double pad = std::max(0.5 * (t1 - t0), 2e5);
  zoomTo(t0 - pad, t1 + pad);
}

}  // namespace stagescope::ui
