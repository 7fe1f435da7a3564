// The inspector: details of the selected action, transfer, gradient or loss.
#include "ui/Inspector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/analysis/Format.h"
#include "core/analysis/Values.h"
#include "core/events/CapturedLayout.h"
#include "ui/ActionTransfers.h"
#include "ui/CollectiveLayer.h"
#include "ui/DetailsPending.h"
#include "ui/Formatting.h"
#include "ui/Theme.h"

namespace stagescope::ui {
namespace {

// A recorded value: NaN and infinities by name (analysis::formatValue, as the reports print it).
std::string num(double v, int digits) {
  return analysis::formatValue(v, digits);
}

// A key and its value; a value wider than the column wraps at the column's edge (never cut).
void row(const char* key, const char* fmt, ...) IM_FMTARGS(2);
void row(const char* key, const char* fmt, ...) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("%s", key);
  ImGui::TableSetColumnIndex(1);
  va_list args;
  va_start(args, fmt);
  ImGui::TextWrappedV(fmt, args);
  va_end(args);
}

bool beginKv(const char* id) {
  if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg))
    return false;
  ImGui::TableSetupColumn("k", ImGuiTableColumnFlags_WidthFixed, 110);
  ImGui::TableSetupColumn("v", ImGuiTableColumnFlags_WidthStretch);
  return true;
}

void header(const char* text, ImU32 colour) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p = ImGui::GetCursorScreenPos();
  float w = ImGui::GetContentRegionAvail().x;
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + 24), theme::kHeaderBand, 2);
  dl->AddRectFilled(p, ImVec2(p.x + 4, p.y + 24), colour, 2);
  dl->AddText(ImVec2(p.x + 10, p.y + 4), theme::kText, text);
  ImGui::Dummy(ImVec2(w, 26));
}

void statsRows(const events::TensorStats& s) {
  row("min / max", "%s / %s", num(s.min, 5).c_str(), num(s.max, 5).c_str());
  row("mean / l2", "%s / %s", num(s.mean, 5).c_str(), num(s.l2, 5).c_str());
  row("numel", "%lld", static_cast<long long>(s.numel));
  if (s.nanCount || s.infCount)
    row("NaN / Inf", "%lld / %lld", static_cast<long long>(s.nanCount),
        static_cast<long long>(s.infCount));
}

// A captured job against the plan of the layout it declared (RunProblems::planConformance),
// in a few words: what the plan overlay shows.
std::string planSummary(const LoadedRun& run) {
  if (!run.detailsLoaded) return "loading details...";
  const analysis::Conformance& c = run.problems.planConformance;
  if (!c.judged) {
    return c.notJudged.empty() ? "no layout declared (stagescope_torch.declare_layout)"
                               : "not judged: " + c.notJudged;
  }
  const int ranks = static_cast<int>(c.ranks.size());
  const int following = ranks - c.deviating() - c.stopped();
  std::string out =
      std::to_string(following) + " of " + std::to_string(ranks) + " ranks follow it to the end";
  if (c.deviating() > 0) out += ", " + std::to_string(c.deviating()) + " deviate";
  if (c.stopped() > 0) out += ", " + std::to_string(c.stopped()) + " stopped";
  return out + " (P: overlay)";
}

// A transfer's own record: edge, direction, iteration, shape.
void transferRows(const events::TransferRecord& t) {
  if (!beginKv("##tkv")) return;
  row("edge", "%s (%s%s%s)", t.edge.c_str(), events::toString(t.edgeKind),
      t.role != events::BridgeRole::None ? ", " : "",
      t.role != events::BridgeRole::None ? events::toString(t.role) : "");
  row("direction", "%s   r%d -> r%d%s", events::toString(t.direction), t.srcRank, t.dstRank,
      model::isLocalHandOff(t) ? "   local hand-off (same rank, no wire)" : "");
  row("iteration", "%d   microbatch %d", t.iteration, t.microbatch);
  row("shape", "%s  %s  %s", formatShape(t.shape).c_str(), t.dtype.c_str(),
      formatBytes(t.bytes).c_str());
  ImGui::EndTable();
}

// One row of the send/receive table: `cell` draws a side's value, "missing" without that side.
template <class Cell>
void sideRow(const char* key, const events::TransferRecord* send,
             const events::TransferRecord* recv, Cell cell) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("%s", key);
  int column = 1;
  for (const events::TransferRecord* side : {send, recv}) {
    ImGui::TableSetColumnIndex(column++);
    if (side)
      cell(*side);
    else
      ImGui::TextDisabled("missing");
  }
}

void nonFiniteCell(const events::TransferRecord& x) {
  if (x.stats.nanCount || x.stats.infCount)
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%lld / %lld",
                       static_cast<long long>(x.stats.nanCount),
                       static_cast<long long>(x.stats.infCount));
  else
    ImGui::Text("0 / 0");
}

// The pair's two sides next to each other; the checksums green when they match.
void sidesTable(const model::RunModel& model, const events::TransferRecord* send,
                const events::TransferRecord* recv, bool match) {
  if (!ImGui::BeginTable("##sides", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchProp))
    return;
  ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, 80);
  ImGui::TableSetupColumn("send");
  ImGui::TableSetupColumn("receive");
  ImGui::TableHeadersRow();
  sideRow("rank", send, recv, [](const events::TransferRecord& x) {
    ImGui::Text("r%d (group %d)", x.rank,
                x.side == events::Side::Send ? x.srcGroupRank : x.dstGroupRank);
  });
  sideRow("time", send, recv, [&](const events::TransferRecord& x) {
    ImGui::Text("%s", formatDuration(static_cast<double>(x.startNs - model.minTimeNs)).c_str());
  });
  sideRow("duration", send, recv, [](const events::TransferRecord& x) {
    ImGui::Text("%s", formatDuration(static_cast<double>(x.endNs - x.startNs)).c_str());
  });
  sideRow("shape", send, recv,
          [](const events::TransferRecord& x) { ImGui::Text("%s", formatShape(x.shape).c_str()); });
  sideRow("checksum", send, recv, [&](const events::TransferRecord& x) {
    if (theme::mono) ImGui::PushFont(theme::mono);
    ImGui::TextColored(match ? ImVec4(0.6f, 0.9f, 0.6f, 1) : ImVec4(1, 0.4f, 0.4f, 1), "%s",
                       hex64(x.checksum).c_str());
    if (theme::mono) ImGui::PopFont();
  });
  sideRow("mean / l2", send, recv, [](const events::TransferRecord& x) {
    ImGui::Text("%s / %s", num(x.stats.mean, 4).c_str(), num(x.stats.l2, 4).c_str());
  });
  sideRow("min / max", send, recv, [](const events::TransferRecord& x) {
    ImGui::Text("%s / %s", num(x.stats.min, 4).c_str(), num(x.stats.max, 4).c_str());
  });
  sideRow("NaN / Inf", send, recv, nonFiniteCell);
  ImGui::EndTable();
}

// Whether sender and receiver agree, in one line.
void agreementLine(bool match, bool shape) {
  const bool agree = match && shape;
  ImGui::PushStyleColor(ImGuiCol_Text,
                        agree ? ImVec4(0.5f, 0.85f, 0.55f, 1) : ImVec4(1, 0.4f, 0.4f, 1));
  if (agree)
    ImGui::TextWrapped("In this run, sender and receiver agree (checksums, shapes)");
  else
    ImGui::TextWrapped("%s%s", match ? "" : "CHECKSUM MISMATCH  ", shape ? "" : "SHAPE MISMATCH");
  ImGui::PopStyleColor();
}

// A transfer's payload as float32 values in `values`, or in `note` why there are none.
void readPayload(const LoadedRun& run, int64_t index, std::vector<float>& values,
                 std::string& note) {
  values.clear();
  note.clear();
  const auto& t = run.model.transfers[index];
  auto bytes = transferPayload(run, index);
  if (bytes.empty()) {
    note =
        "payload not recorded (level " + std::string(events::toString(run.model.info.level)) + ")";
  } else if (t.dtype == "float32") {
    values.resize(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), values.size() * 4);
  } else {
    note = std::to_string(bytes.size()) + " bytes of " + t.dtype + " (histogram for float32 only)";
  }
}

// Payload: histogram and first values (level full only).
void drawPayload(const std::vector<float>& values, const std::string& note) {
  ImGui::Spacing();
  ImGui::TextDisabled("Payload");
  if (values.empty()) {
    ImGui::TextDisabled("%s", note.c_str());
    return;
  }
  float lo = 1e30f, hi = -1e30f;
  for (float v : values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  std::vector<float> bins(48, 0);
  for (float v : values)
    if (std::isfinite(v) && hi > lo)
      bins[std::min<size_t>(47, static_cast<size_t>((v - lo) / (hi - lo) * 48))] += 1;
  char overlay[64];
  std::snprintf(overlay, sizeof overlay, "[%.3g, %.3g]", lo, hi);
  ImGui::PlotHistogram("##hist", bins.data(), 48, 0, overlay, 0, FLT_MAX, ImVec2(-1, 70));
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(8, values.size()); ++i) {
    char b[24];
    std::snprintf(b, sizeof b, "%.4g ", values[i]);
    first += b;
  }
  ImGui::TextWrapped("first values: %s", first.c_str());
}

void inspectCompared(PanelContext& panel, analysis::ItemKind kind, int64_t index);

void inspectAction(PanelContext& panel, int rank, int64_t index) {
  const LoadedRun* run = panel.main.run.get();
  const auto& model = run->model;
  if (rank < 0 || rank >= static_cast<int>(model.actions.size()) || index < 0 ||
      index >= static_cast<int64_t>(model.actions[rank].size()))
    return;
  const auto& a = model.actions[rank][index];
  // The action's own module (a colocated rank holds several); a rank-wide action: the row's.
  int mi = run->rows.empty() || run->rowOfRank[rank] < 0
               ? -1
               : run->rows[run->rowOfRank[rank]].moduleIndex;
  for (size_t i = 0; i < model.info.modules.size(); ++i)
    if (!a.module.empty() && model.info.modules[i].name == a.module) mi = static_cast<int>(i);
  char title[128];
  std::snprintf(title, sizeof title, "Action  %s %s  on rank %d", events::toString(a.kind),
                microbatchSuffix(a.microbatch).c_str(), rank);
  header(title, theme::actionColour(mi, static_cast<int>(a.kind)));
  if (beginKv("##akv")) {
    const auto* ri = model.placementOf(a);
    if (ri)
      row("rank", "%d  %s tp%d pp%d dp%d  stage %d/%d", rank, ri->module.c_str(), ri->tp, ri->pp,
          ri->dp, ri->globalStage, ri->totalStages);
    row("module", "%s", a.module.empty() ? "(rank-wide)" : a.module.c_str());
    if (model.colocated(rank))
      row("shared", "rank %d holds %s (one 1F1B order)", rank, model.moduleLabel(rank).c_str());
    row("iteration", "%d   seq %d", a.iteration, a.seq);
    row("microbatch", "%d", a.microbatch);
    row("start", "%s", formatDuration(static_cast<double>(a.startNs - model.minTimeNs)).c_str());
    row("end", "%s", formatDuration(static_cast<double>(a.endNs - model.minTimeNs)).c_str());
    row("duration", "%s", formatDuration(static_cast<double>(a.endNs - a.startNs)).c_str());
    std::string peers;
    for (int p : a.peers) peers += (peers.empty() ? "" : ", ") + std::to_string(p);
    row("peers", "%s", peers.empty() ? "-" : peers.c_str());
    if (rank < static_cast<int>(model.plan.size()) &&
        index < static_cast<int64_t>(model.plan[rank].size())) {
      const auto& p = model.plan[rank][index];
      bool dev = p.kind != a.kind || p.microbatch != a.microbatch;
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextDisabled("plan");
      ImGui::TableSetColumnIndex(1);
      if (dev)
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s mb%d  (deviation)",
                           events::toString(p.kind), p.microbatch);
      else
        ImGui::TextColored(ImVec4(0.5f, 0.85f, 0.55f, 1), "%s mb%d  (as planned)",
                           events::toString(p.kind), p.microbatch);
    } else if (!run->detailsLoaded) {  // the plan is a detail
      panel.probes.detailsPendingPanels.push_back("inspector");
      row("plan", "%s", detailsNote(panel.main).c_str());
    }
    int64_t b = run->replay.positionOf(rank, static_cast<int32_t>(index), false);
    int64_t e = run->replay.positionOf(rank, static_cast<int32_t>(index), true);
    row("replay", "begins at step %lld, ends at %lld", static_cast<long long>(b + 1),
        static_cast<long long>(e + 1));
    ImGui::EndTable();
  }
  if (ImGui::Button("Go to begin"))
    panel.nav.stepTo(run->replay.positionOf(rank, static_cast<int32_t>(index), false) + 1);
  ImGui::SameLine();
  if (ImGui::Button("Go to end"))
    panel.nav.stepTo(run->replay.positionOf(rank, static_cast<int32_t>(index), true) + 1);
  ImGui::SameLine();
  if (ImGui::Button("Zoom")) panel.nav.focusAction(rank, index);
  auto transfers = transfersOfAction(model, rank, index);
  if (!transfers.empty()) {
    ImGui::Spacing();
    ImGui::TextDisabled("Transfers of this action");
    for (int64_t ti : transfers) {
      const auto& t = model.transfers[ti];
      int32_t p = run->transferPair[ti];
      bool ok = p < 0 || model.pairs[p].sidesAgree();
      char label[160];
      std::snprintf(label, sizeof label, "%s %s  r%d -> r%d  %s##t%lld", events::toString(t.side),
                    t.edge.c_str(), t.srcRank, t.dstRank, ok ? "" : "MISMATCH",
                    static_cast<long long>(ti));
      if (ImGui::Selectable(label))
        panel.nav.select({Selection::Kind::Transfer, t.rank, ti}, false);
    }
  }
}

void inspectTransfer(PanelContext& panel, int64_t index, InspectorPayload& payload) {
  const LoadedRun* run = panel.main.run.get();
  const auto& model = run->model;
  if (index < 0 || index >= static_cast<int64_t>(model.transfers.size())) return;
  const int32_t p = run->transferPair[index];
  const auto* send =
      p >= 0 && model.pairs[p].send >= 0 ? &model.transfers[model.pairs[p].send] : nullptr;
  const auto* recv =
      p >= 0 && model.pairs[p].recv >= 0 ? &model.transfers[model.pairs[p].recv] : nullptr;
  const auto& t = model.transfers[index];
  char title[160];
  std::snprintf(title, sizeof title, "Transfer  %s  %s", t.edge.c_str(),
                events::toString(t.direction));
  header(title, t.edgeKind == events::EdgeKind::Bridge ? theme::kBridge : theme::kP2P);
  transferRows(t);
  bool match = p < 0 || model.pairs[p].checksumMatches;
  bool shape = p < 0 || (model.pairs[p].shapeMatches && model.pairs[p].dtypeMatches);
  sidesTable(model, send, recv, match);
  agreementLine(match, shape);
  if (p >= 0) {
    const PairActions& pa = run->pairActions[p];
    if (pa.sendAction >= 0 && ImGui::Button("Send action"))
      panel.nav.select({Selection::Kind::Action, pa.sendRank, pa.sendAction}, true);
    ImGui::SameLine();
    if (pa.recvAction >= 0 && ImGui::Button("Receive action"))
      panel.nav.select({Selection::Kind::Action, pa.recvRank, pa.recvAction}, true);
    ImGui::SameLine();
    if (pa.recvAction >= 0 && ImGui::Button("Go to step"))
      panel.nav.stepTo(run->replay.positionOf(pa.recvRank, pa.recvAction, true) + 1);
  }
  if (payload.index != index) {
    payload.index = index;
    readPayload(*run, index, payload.values, payload.note);
  }
  drawPayload(payload.values, payload.note);
  inspectCompared(panel, analysis::ItemKind::Transfer, index);
}

void inspectGradient(PanelContext& panel, int64_t index) {
  const LoadedRun* run = panel.main.run.get();
  const auto& model = run->model;
  if (index < 0 || index >= static_cast<int64_t>(model.gradients.size())) return;
  const auto& g = model.gradients[index];
  char title[200];
  std::snprintf(title, sizeof title, "Gradient  %s", g.param.c_str());
  header(title, theme::kGradient);
  if (beginKv("##gkv")) {
    row("phase", "%s", events::toString(g.phase));
    row("rank", "r%d  tp%d pp%d dp%d", g.rank, g.tp, g.pp, g.dp);
    row("iteration", "%d   microbatch %d", g.iteration, g.microbatch);
    row("shape", "%s of %s  %s", formatShape(g.shape).c_str(), formatShape(g.fullShape).c_str(),
        g.dtype.c_str());
    row("partition", g.partitionDim < 0 ? "replicated" : "dim %d at offset %lld", g.partitionDim,
        static_cast<long long>(g.partitionOffset));
    row("norm", "%s", num(g.norm, 8).c_str());
    row("checksum", "%s", hex64(g.checksum).c_str());
    if (g.hasStats) statsRows(g.stats);
    ImGui::EndTable();
  }
  // Per-microbatch norms of this shard in this iteration, the reduced norm and the reference.
  std::vector<float> perMb;
  double reducedSq = 0;
  bool haveReduced = false;
  double reference = -1;
  std::vector<int64_t> seenOffsets;
  for (const auto& h : model.gradients) {
    if (h.iteration != g.iteration || h.param != g.param) continue;
    if (h.phase == events::GradPhase::Accumulated && h.rank == g.rank)
      perMb.push_back(static_cast<float>(h.norm));
    if (h.phase == events::GradPhase::Reduced && h.dp == 0 &&
        std::find(seenOffsets.begin(), seenOffsets.end(), h.partitionOffset) == seenOffsets.end()) {
      seenOffsets.push_back(h.partitionOffset);
      reducedSq += h.norm * h.norm;
      haveReduced = true;
    }
  }
  for (const auto& h : model.referenceGradients)  // the truth, not the bound's second computation
    if (h.iteration == g.iteration && h.param == g.param && analysis::isReferenceTruth(h))
      reference = h.norm;
  if (!perMb.empty()) {
    ImGui::TextDisabled("Accumulated norm after each microbatch (this shard)");
    ImGui::PlotLines("##mbnorms", perMb.data(), static_cast<int>(perMb.size()), 0, nullptr, 0,
                     FLT_MAX, ImVec2(-1, 70));
  }
  if (beginKv("##gred")) {
    if (haveReduced) row("reduced (full)", "%s", num(std::sqrt(reducedSq), 8).c_str());
    if (reference >= 0) {
      row("reference", "%s", num(reference, 8).c_str());
      if (haveReduced) {
        double rel = std::fabs(std::sqrt(reducedSq) - reference) / std::max(1e-30, reference);
        row("difference", "%.3g relative", rel);
      }
    } else {
      row("reference", "not recorded");
    }
    ImGui::EndTable();
  }
  inspectCompared(panel, analysis::ItemKind::Gradient, index);
}

// Why the run hung, as far as it concerns `rank` (root cause first), in the rank's fate colour.
void stuckCauses(const RunProblems::Causes& causes, ImU32 colour) {
  if (causes.lines.empty()) return;
  ImGui::TextDisabled("%s", causes.own ? "why (root cause first)" : "the run's root cause");
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(colour));
  for (const auto& line : causes.lines) ImGui::TextWrapped("%s", line.c_str());
  ImGui::PopStyleColor();
  ImGui::Spacing();
}

// A rank that did not complete: its fate, the operation it never completed, whom it waits
// on, since when and for how long, and why (its own record).
void inspectStuck(PanelContext& panel, int rank) {
  const LoadedRun* run = panel.main.run.get();
  const RankProblem* fate = run ? run->fateOf(rank) : nullptr;
  if (!fate || fate->fate == RankFate::Completed) return;
  const auto& model = run->model;
  const auto& acts = model.actions[static_cast<size_t>(rank)];
  header("Stuck", theme::fateColour(fate->fate));
  const int64_t since = acts.empty() ? model.minTimeNs : acts.back().endNs;
  if (beginKv("##stuckkv")) {
    row("rank", "r%d  %s", rank, model.moduleLabel(rank).c_str());
    row("fate", "%s", toString(fate->fate));
    const auto* plan = rank < static_cast<int>(model.plan.size()) ? &model.plan[rank] : nullptr;
    if (plan && fate->stuckPlan >= 0 && fate->stuckPlan < static_cast<int32_t>(plan->size())) {
      const auto& pa = (*plan)[static_cast<size_t>(fate->stuckPlan)];
      row(fate->fate == RankFate::Hung ? "stuck in" : "next planned", "%s  it%d %s",
          events::toString(pa.kind), pa.iteration, microbatchSuffix(pa.microbatch).c_str());
    }
    for (const auto& w : model.waits) {  // what the rank itself recorded it waits on
      if (w.rank != rank) continue;
      row("waiting to", "%s %s on %s (it%d mb%d)",
          w.op == events::WaitOp::Send ? "send" : "receive", events::toString(w.direction),
          w.edge.c_str(), w.iteration, w.microbatch);
      break;
    }
    if (fate->waitsOnRank >= 0) row("waits on", "rank %d", fate->waitsOnRank);
    row("since", "%s into the run",
        formatDuration(static_cast<double>(since - model.minTimeNs)).c_str());
    row("stuck for", "%s",
        formatDuration(static_cast<double>(std::max(fate->stuckUntilNs, since) - since)).c_str());
    ImGui::EndTable();
  }
  const RunProblems::Causes causes = run->problems.causesOf(rank);
  stuckCauses(causes, theme::fateColour(fate->fate));
  // The rank's own record (unless it was the cause above); its wait sentence only when the
  // record does not already say it.
  const bool recordShown = !causes.lines.empty() && causes.lines.front() == fate->why;
  if (!fate->why.empty() && !recordShown) ImGui::TextWrapped("%s", fate->why.c_str());
  for (const WaitEdge& w : run->problems.waits)
    if (w.rank == rank && fate->why.rfind(w.sentence, 0) != 0)
      ImGui::TextWrapped("%s", w.sentence.c_str());
}

void inspectLoss(PanelContext& panel, int64_t index) {
  const LoadedRun* run = panel.main.run.get();
  const auto& model = run->model;
  if (index < 0 || index >= static_cast<int64_t>(model.losses.size())) return;
  const auto& l = model.losses[index];
  header("Loss", theme::kGood);
  if (beginKv("##lkv")) {
    row("value", "%s", num(l.loss, 8).c_str());
    row("rank", "r%d  dp%d", l.rank, l.dp);
    row("iteration", "%d   microbatch %d", l.iteration, l.microbatch);
    ImGui::EndTable();
  }
  inspectCompared(panel, analysis::ItemKind::Loss, index);
}

// With a comparison open: run B's side of the selected record of run A (its aligned item),
// next to A's, the rows that differ highlighted.
void inspectCompared(PanelContext& panel, analysis::ItemKind kind, int64_t index) {
  const analysis::Comparison* c = panel.nav.comparison();
  const LoadedRun* a = panel.main.run.get();
  const LoadedRun* b = panel.other.run.get();
  if (!c || !a || !b) return;
  // A transfer is aligned by its send side: a selected receive stands for its message.
  int64_t key = index;
  if (kind == analysis::ItemKind::Transfer) {
    const int32_t p = a->transferPair[index];
    if (p >= 0 && a->model.pairs[p].send >= 0) key = a->model.pairs[p].send;
  }
  const analysis::AlignedItem* item = nullptr;
  for (const auto& it : c->alignment.items) {
    if (it.kind == kind && (it.a == key || it.a == index)) {
      item = &it;
      break;
    }
  }
  ImGui::Spacing();
  ImGui::Separator();
  if (!item) {
    ImGui::TextDisabled("Compare: this record is not aligned with run B");
    return;
  }
  const bool differ = item->state == analysis::ItemState::Differ;
  const ImVec4 bad(1, 0.4f, 0.4f, 1), ok(0.6f, 0.9f, 0.6f, 1), amber(0.95f, 0.75f, 0.3f, 1);
  ImGui::TextColored(differ                                          ? bad
                     : item->state == analysis::ItemState::Identical ? ok
                                                                     : amber,
                     "Compare: %s (%s)", analysis::toString(item->state),
                     analysis::toString(item->evidence));
  ImGui::TextWrapped("aligned as %s", item->key.c_str());
  // One naming of microbatches: the key counts them across the DP replicas (gmb = microbatch x
  // dp size + dp), the record's rows above per replica.
  const bool isTransfer = kind == analysis::ItemKind::Transfer;
  if ((isTransfer || kind == analysis::ItemKind::Loss) && item->microbatch >= 0) {
    const int own = isTransfer ? a->model.transfers[key].microbatch
                               : a->model.losses[static_cast<size_t>(index)].microbatch;
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "gmb%d: the global microbatch, counted over the DP replicas; this %s is "
        "microbatch %d of its replica",
        item->microbatch, isTransfer ? "message" : "loss", own);
    ImGui::PopStyleColor();
  }
  if (!ImGui::BeginTable("##cmp", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchProp))
    return;
  ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, 80);
  ImGui::TableSetupColumn("run A (this)");
  ImGui::TableSetupColumn("run B");
  ImGui::TableHeadersRow();
  auto two = [&](const char* k, const std::string& va, const std::string& vb, bool highlight) {
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextDisabled("%s", k);
    for (int col = 1; col <= 2; ++col) {
      ImGui::TableSetColumnIndex(col);
      const std::string& v = col == 1 ? va : vb;
      if (highlight)
        ImGui::TextColored(bad, "%s", v.c_str());
      else
        ImGui::TextUnformatted(v.c_str());
    }
  };
  auto num8 = [](double x) { return num(x, 8); };
  const bool hasB = item->b >= 0;
  const char* what = kind == analysis::ItemKind::Loss ? "value" : "L2 norm";
  two(what, num8(item->valueA), hasB ? num8(item->valueB) : "missing",
      hasB && !(item->valueA == item->valueB));
  two("checksum", hex64(item->checksumA), hasB ? hex64(item->checksumB) : "missing",
      hasB && item->checksumA != item->checksumB);
  if (kind == analysis::ItemKind::Transfer && hasB &&
      item->b < static_cast<int64_t>(b->model.transfers.size())) {
    const auto& ta = a->model.transfers[key];
    const auto& tb = b->model.transfers[item->b];
    two("microbatch", std::to_string(ta.microbatch), std::to_string(tb.microbatch), false);
    two("shape", formatShape(ta.shape), formatShape(tb.shape), ta.shape != tb.shape);
    two("NaN / Inf", std::to_string(ta.stats.nanCount) + " / " + std::to_string(ta.stats.infCount),
        std::to_string(tb.stats.nanCount) + " / " + std::to_string(tb.stats.infCount),
        ta.stats.nanCount != tb.stats.nanCount || ta.stats.infCount != tb.stats.infCount);
  }
  ImGui::EndTable();
  if (item->state != analysis::ItemState::Identical && hasB) {
    ImGui::TextColored(differ ? bad : amber, "relative distance %.3g %s tolerance %.3g",
                       item->distance, differ ? ">" : "<=", item->tolerance);
  }
}

}  // namespace

void Inspector::draw(PanelContext& panel, const ImVec2& pos, const ImVec2& size) {
  panel.probes.inspector = ImVec4(pos.x, pos.y, pos.x + size.x, pos.y + size.y);
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, theme::kInspectorBackground);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(10, 8));
  ImGui::BeginChild("##inspector", size, false, ImGuiWindowFlags_AlwaysUseWindowPadding);
  ImGui::PopStyleVar();
  ImGui::TextDisabled("INSPECTOR");
  ImGui::Separator();
  const LoadedRun* run = panel.main.run.get();
  const Selection& s = panel.view.selection;
  if (!run || s.kind == Selection::Kind::None) {
    ImGui::TextWrapped(
        "Click an action or a transfer arrow on the timeline, a rank in the grid map, "
        "or a row in Find / Compare.");
    if (run) {
      ImGui::Spacing();
      header("Run", theme::kInfo);
      const auto& info = run->model.info;
      if (beginKv("##runkv")) {
        row("run id", "%s", info.runId.c_str());
        row("status", "%s %s", events::toString(info.status), info.statusReason.c_str());
        row("world", "%d ranks, %zu modules", info.worldSize, info.modules.size());
        const bool captured = info.captured();
        if (captured && info.microbatches == 0)
          row("schedule", "%d iterations (microbatches: no layout declared)", info.iterations);
        else
          row("schedule", "%d iterations x %d microbatches", info.iterations, info.microbatches);
        row("level", "%s", events::toString(info.level));
        if (captured)  // the capture sees the job's messages, not its forward/backward compute
          row("bubble", "%s", "not measured (a captured job records communication only)");
        else
          row("bubble", "measured %.1f %%  expected %.1f %%", 100 * run->time.measuredBubble,
              100 * run->time.expectedBubble);
        if (captured) row("plan", "%s", planSummary(*run).c_str());
        row("replay", "%zu steps", run->replay.size());
        ImGui::EndTable();
      }
    }
  } else {
    switch (s.kind) {
      case Selection::Kind::Action:
        inspectAction(panel, s.rank, s.index);
        break;
      case Selection::Kind::Transfer:
        inspectTransfer(panel, s.index, payload_);
        break;
      case Selection::Kind::Gradient:
        inspectGradient(panel, s.index);
        break;
      case Selection::Kind::Loss:
        inspectLoss(panel, s.index);
        break;
      case Selection::Kind::Collective:
        inspectCollective(panel, s.index);
        break;
      case Selection::Kind::Stuck:
        inspectStuck(panel, s.rank);
        break;
      default:
        break;
    }
  }
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

}  // namespace stagescope::ui
