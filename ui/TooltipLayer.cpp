// The timeline's tooltip: what the mouse is on (Timeline::draw picks it among the layers'
// hover candidates): an action or a folded run of them, a collective, a transfer; a stuck
// block's explanation comes first when the mouse is on one.
#include "ui/TooltipLayer.h"

#include <string>

#include "ui/CollectiveLayer.h"
#include "ui/Formatting.h"
#include "ui/StuckLayer.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

namespace {

void actionTooltip(const TimelineContext& ctx, const TimelineHover& hover) {
  const auto& model = ctx.model();
  const auto& a = model.actions[hover.what.rank][hover.what.index];
  ImGui::BeginTooltip();
  if (hover.folded) {
    ImGui::Text("%zu actions on rank %d (zoom in)", hover.folded, hover.what.rank);
    ImGui::TextDisabled(
        "%s", formatDuration(static_cast<double>(hover.foldEnd - hover.foldStart)).c_str());
    ImGui::EndTooltip();
    return;
  }
  ImGui::Text("%s  it%d  mb%d   rank %d (%s pp%d)", events::toString(a.kind), a.iteration,
              a.microbatch, a.rank, a.module.c_str(), a.stage);
  ImGui::TextDisabled("start %s   duration %s",
                      formatDuration(static_cast<double>(a.startNs - model.minTimeNs)).c_str(),
                      formatDuration(static_cast<double>(a.endNs - a.startNs)).c_str());
  if (!a.peers.empty()) {
    std::string peers;
    for (int p : a.peers) peers += (peers.empty() ? "" : ", ") + std::to_string(p);
    ImGui::TextDisabled("peers %s", peers.c_str());
  }
  const RankReplayState st = ctx.run->replay.stateAt(hover.what.rank, ctx.step);
  const char* state = hover.what.index < st.done                    ? "done"
                      : (st.running && hover.what.index == st.done) ? "running"
                                                                    : "pending";
  ImGui::TextDisabled("at step %lld: %s", static_cast<long long>(ctx.step), state);
  ImGui::EndTooltip();
}

void transferTooltip(const TimelineContext& ctx, int64_t index) {
  const auto& t = ctx.model().transfers[index];
  ImGui::BeginTooltip();
  ImGui::Text("%s %s  it%d mb%d%s", t.edge.c_str(), events::toString(t.direction), t.iteration,
              t.microbatch, model::isLocalHandOff(t) ? "  (local hand-off)" : "");
  ImGui::TextDisabled("r%d -> r%d   %s  %s  %s", t.srcRank, t.dstRank, formatShape(t.shape).c_str(),
                      t.dtype.c_str(), formatBytes(t.bytes).c_str());
  ImGui::EndTooltip();
}

}  // namespace

void drawTimelineTooltip(const TimelineContext& ctx, const TimelineHover& hover) {
  if (hover.stuckRank >= 0) stuckTooltip(ctx, hover.stuckRank);
  if (!ctx.hovered) return;
  switch (hover.what.kind) {
    case Selection::Kind::Action:
      actionTooltip(ctx, hover);
      break;
    case Selection::Kind::Collective:
      collectiveTooltip(ctx, hover.what.index);
      break;
    case Selection::Kind::Transfer:
      transferTooltip(ctx, hover.what.index);
      break;
    default:
      break;
  }
}

}  // namespace stagescope::ui
