// Compare: the open run (A) against a second run (B) of any layout of the same model and seed,
// as analysis::compareRuns judges them (RunComparison.h): the verdict with its reason, what
// was compared, the first divergent message (one click to it), and the loss and gradient rows.
#include "ui/ComparePanel.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/analysis/Format.h"
#include "ui/DetailsPending.h"
#include "ui/FitText.h"

namespace stagescope::ui {
namespace {

const ImVec4 kGreen(0.5f, 0.85f, 0.55f, 1), kRed(1, 0.4f, 0.4f, 1), kAmber(1, 0.75f, 0.35f, 1);

ImVec4 verdictColour(analysis::Verdict v) {
  switch (v) {
    case analysis::Verdict::Identical:
    case analysis::Verdict::WithinTolerance:
      return kGreen;
    case analysis::Verdict::Diverged:
      return kRed;
    default:
      return kAmber;  // any verdict that is neither equal nor diverged (e.g. incomplete)
  }
}

// A value cell: NaN and Inf by name, never as a number.
void valueCell(bool present, double v) {
  if (!present)
    ImGui::TextDisabled("-");
  else if (std::isnan(v))
    ImGui::TextColored(kRed, "NaN");
  else if (std::isinf(v))
    ImGui::TextColored(kRed, v > 0 ? "+Inf" : "-Inf");
  else
    ImGui::TextUnformatted(analysis::formatValue(v, 9).c_str());
}

// The relative difference as the analysis measured it (the verdict above judges it).
void relDiffCell(double d) {
  if (std::isnan(d))
    ImGui::TextDisabled("-");
  else
    ImGui::Text("%.3g", d);
}

// A line in the dim colour that wraps at the panel's edge instead of running past it.
void dimWrapped(const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
}

// What was compared and how it was judged: the two runs, the verdict with its reason, the
// counts, what is missing, the evidence and the tolerance.  Every line wraps at the panel's
// edge: a cut sentence reads as a different one.
void comparisonSummary(const analysis::Comparison& c) {
  ImGui::TextWrapped("A: %s (%s)    B: %s (%s)", c.a.path.c_str(), c.a.status.c_str(),
                     c.b.path.c_str(), c.b.status.c_str());
  dimWrapped("layouts: " + c.a.layout + "  vs  " + c.b.layout);
  // The verdict, as `stagescope compare` and the reports state it.
  std::string verdict = analysis::toString(c.verdict);
  for (char& ch : verdict) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  ImGui::PushStyleColor(ImGuiCol_Button, verdictColour(c.verdict));
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.08f, 0.08f, 0.1f, 1));
  ImGui::SmallButton(verdict.c_str());
  ImGui::PopStyleColor(2);
  ImGui::SameLine();
  ImGui::TextWrapped("%s", c.verdictReason.c_str());
  char counts[512];
  std::snprintf(
      counts, sizeof counts,
      "messages: %zu compared, %zu differ, %zu within tolerance, %zu only in A, %zu only in B   "
      "losses: %zu compared, %zu differ, %zu within tolerance (max rel %.3g)   reduced gradients: "
      "%zu "
      "compared, %zu differ, %zu within tolerance (max rel %.3g)",
      c.transfersCompared, c.transfersDiffering, c.transfersWithinTolerance, c.transfersOnlyA,
      c.transfersOnlyB, c.lossesCompared, c.lossesDiffering, c.lossesWithinTolerance,
      c.maxLossRelDiff, c.gradsCompared, c.gradsDiffering, c.gradsWithinTolerance,
      c.maxGradRelDiff);
  dimWrapped(counts);
  for (const auto& line : c.missing) {
    ImGui::PushStyleColor(ImGuiCol_Text, kAmber);
    ImGui::TextWrapped("missing: %s", line.c_str());
    ImGui::PopStyleColor();
  }
  dimWrapped("evidence: " + c.evidence + "   tolerance: " + c.toleranceRule);
}

constexpr ImGuiTableFlags kTableFlags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                        ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable;
// A column as wide as its widest cell, every frame (a number is never cut); the name and value
// columns stretch over the rest.
constexpr ImGuiTableColumnFlags kFitted =
    ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoResize;

// The losses of A and B side by side (bitwise equal ones left out with `differencesOnly`).
void lossTable(const analysis::Comparison& c, bool differencesOnly, float width) {
  if (!ImGui::BeginTable("##losses", 6, kTableFlags, ImVec2(width, 0))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("loss it", kFitted);
  ImGui::TableSetupColumn("mb", kFitted);
  ImGui::TableSetupColumn("dp", kFitted);
  ImGui::TableSetupColumn("A", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("B", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("rel diff", kFitted);
  ImGui::TableHeadersRow();
  for (const auto& l : c.losses) {
    const bool bitwiseEqual = l.hasA && l.hasB && l.diff == 0;
    if (differencesOnly && bitwiseEqual) continue;
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::Text("%d", l.iteration);
    ImGui::TableSetColumnIndex(1);
    ImGui::Text("%d", l.microbatch);
    ImGui::TableSetColumnIndex(2);
    if (l.dp < 0)
      ImGui::TextDisabled("mean");
    else
      ImGui::Text("%d", l.dp);
    ImGui::TableSetColumnIndex(3);
    valueCell(l.hasA, l.a);
    ImGui::TableSetColumnIndex(4);
    valueCell(l.hasB, l.b);
    ImGui::TableSetColumnIndex(5);
    relDiffCell(l.relDiff);
  }
  ImGui::EndTable();
}

// A parameter's name, shortened in the middle when the column is narrower ("llm.layers.0.
// ...k.bias": both ends name it), the whole name on hover.
void parameterCell(const std::string& name) {
  const std::string shown = elideMiddle(name, ImGui::GetContentRegionAvail().x);
  ImGui::TextUnformatted(shown.c_str());
  if (shown != name && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", name.c_str());
}

// The gradients that differ most, A's norm next to B's.
void gradientTable(const analysis::Comparison& c, bool differencesOnly, float width) {
  if (!ImGui::BeginTable("##grads", 6, kTableFlags, ImVec2(width, 0))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("gradient (largest differences)", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("it", kFitted);
  ImGui::TableSetupColumn("norm A", kFitted);
  ImGui::TableSetupColumn("norm B", kFitted);
  ImGui::TableSetupColumn("rel diff", kFitted);
  ImGui::TableSetupColumn("by", kFitted);
  ImGui::TableHeadersRow();
  for (const auto& g : c.gradTop) {
    if (differencesOnly && g.bitwiseEqual) continue;
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    parameterCell(g.param);
    ImGui::TableSetColumnIndex(1);
    ImGui::Text("%d", g.iteration);
    ImGui::TableSetColumnIndex(2);
    valueCell(g.hasA, g.normA);
    ImGui::TableSetColumnIndex(3);
    valueCell(g.hasB, g.normB);
    ImGui::TableSetColumnIndex(4);
    relDiffCell(g.relDiff);
    ImGui::TableSetColumnIndex(5);
    ImGui::TextDisabled("%s", g.how.c_str());
  }
  ImGui::EndTable();
}

// No compare run yet: a path field, the recent runs, the last error.
void drawCompareOpen(PanelContext& panel) {
  ImGui::TextUnformatted(
      "Compare this run with a second run (any layout of the same model and seed).");
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%s", panel.view.openPath.c_str());
  ImGui::SetNextItemWidth(420);
  bool enter = ImGui::InputTextWithHint("##cmp", "path to a run file (.db)", buf, sizeof buf,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  panel.view.openPath = buf;
  ImGui::SameLine();
  if (ImGui::Button("Open for compare") || enter) panel.opener.openCompare(panel.view.openPath);
  for (const auto& r : panel.view.recent) {
    if (r == panel.main.path) continue;
    if (ImGui::SmallButton(r.c_str())) panel.opener.openCompare(r);
    ImGui::SameLine();
  }
  ImGui::NewLine();
  if (!panel.other.error.empty()) ImGui::TextColored(kRed, "%s", panel.other.error.c_str());
}

}  // namespace

void drawCompare(PanelContext& panel) {
  if (!panel.main.run) {
    ImGui::TextDisabled("Open a run first.");
    return;
  }
  if (!panel.opener.pendingCompare().empty() && drawDetailsPending(panel, "compare"))
    return;  // compares whole runs
  if (panel.other.loading() || !panel.opener.pendingCompare().empty()) {
    ImGui::Text("Loading and comparing %s", panel.opener.pendingCompare().empty()
                                                ? panel.other.path.c_str()
                                                : panel.opener.pendingCompare().c_str());
    ImGui::ProgressBar(panel.other.progress(), ImVec2(300, 0));
    return;
  }
  const analysis::Comparison* c = panel.nav.comparison();
  if (!panel.other.run || !c) {
    drawCompareOpen(panel);
    return;
  }
  comparisonSummary(*c);
  ImGui::Checkbox("differences only", &panel.view.compareDifferencesOnly);
  ImGui::SameLine(0, 20);
  if (c->first) {
    ImGui::BeginDisabled(c->first->a < 0);
    if (ImGui::Button("Jump to first divergence")) panel.nav.showDivergence();
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::PushStyleColor(ImGuiCol_Text, kAmber);
    ImGui::TextWrapped("first divergence: %s", c->firstText.c_str());
    ImGui::PopStyleColor();
  } else {
    ImGui::TextDisabled("no divergence among the compared items");
  }

  // Losses and the gradients that differ most, side by side.
  const float half = (ImGui::GetContentRegionAvail().x - 8) / 2;
  lossTable(*c, panel.view.compareDifferencesOnly, half);
  ImGui::SameLine(0, 8);
  gradientTable(*c, panel.view.compareDifferencesOnly, half);
}

}  // namespace stagescope::ui
