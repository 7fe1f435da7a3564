// Find: filter actions, transfers or gradients, and list the hits.
#include "ui/FindPanel.h"

#include <cstdio>

#include "core/analysis/Format.h"
#include "ui/DetailsPending.h"
#include "ui/Formatting.h"

namespace stagescope::ui {

namespace {

// The kind combo's entries for what is searched: "any kind" first.
std::vector<const char*> kindNames(FindWhat what) {
  std::vector<const char*> kinds = {"any kind"};
  if (what == FindWhat::Actions)
    for (int k = 0; k < static_cast<int>(events::ActionKind::Count); ++k)
      kinds.push_back(events::toString(static_cast<events::ActionKind>(k)));
  else if (what == FindWhat::Transfers)
    kinds.insert(kinds.end(), {"activation", "gradient"});
  else
    for (int k = 0; k < 5; ++k)
      kinds.push_back(events::toString(static_cast<events::GradPhase>(k)));
  return kinds;
}

// The module filter; true when it changed.
bool moduleCombo(const model::RunModel& model, std::string& module) {
  bool changed = false;
  if (ImGui::BeginCombo("module", module.empty() ? "any" : module.c_str())) {
    if (ImGui::Selectable("any", module.empty())) module.clear(), changed = true;
    for (const auto& m : model.info.modules)
      if (ImGui::Selectable(m.name.c_str(), module == m.name)) module = m.name, changed = true;
    ImGui::EndCombo();
  }
  return changed;
}

// The filter bar; true when the query changed.  `focus` (Ctrl+F) gives the rank field the
// keyboard once.
bool findFilters(const model::RunModel& model, FindQuery& q, bool* focus) {
  bool changed = false;
  static const char* what[] = {"Actions", "Transfers", "Gradients"};
  int w = static_cast<int>(q.what);
  ImGui::SetNextItemWidth(110);
  if (ImGui::Combo("##what", &w, what, 3)) {
    q.what = static_cast<FindWhat>(w);
    q.kind = -1;
    changed = true;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  if (*focus) {
    ImGui::SetKeyboardFocusHere();
    *focus = false;
  }
  changed |= ImGui::InputInt("rank", &q.rank);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  changed |= moduleCombo(model, q.module);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  changed |= ImGui::InputInt("iteration", &q.iteration);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  changed |= ImGui::InputInt("microbatch", &q.microbatch);
  ImGui::SameLine();
  std::vector<const char*> kinds = kindNames(q.what);
  int kind = q.kind + 1;
  ImGui::SetNextItemWidth(120);
  if (ImGui::Combo("##kind", &kind, kinds.data(), static_cast<int>(kinds.size())))
    q.kind = kind - 1, changed = true;
  ImGui::SameLine();
  changed |= ImGui::Checkbox("NaN/Inf", &q.nanInf);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("checksum mismatch", &q.mismatch);
  q.rank = std::max(-1, q.rank);
  q.iteration = std::max(-1, q.iteration);
  q.microbatch = std::max(-1, q.microbatch);
  return changed;
}

Selection selectionOf(const FindHit& h) {
  if (h.what == FindWhat::Actions) return {Selection::Kind::Action, h.rank, h.index};
  if (h.what == FindWhat::Transfers) return {Selection::Kind::Transfer, h.rank, h.index};
  return {Selection::Kind::Gradient, h.rank, h.index};
}

// A hit's columns after the rank: it / mb, what, detail, time.
void actionCells(const model::RunModel& model, const FindHit& h) {
  const auto& a = model.actions[h.rank][h.index];
  ImGui::Text("%d / %d", a.iteration, a.microbatch);
  ImGui::TableSetColumnIndex(2);
  ImGui::TextUnformatted(events::toString(a.kind));
  ImGui::TableSetColumnIndex(3);
  ImGui::Text("%s pp%d", a.module.c_str(), a.stage);
  ImGui::TableSetColumnIndex(4);
  ImGui::TextUnformatted(formatDuration(static_cast<double>(a.startNs - model.minTimeNs)).c_str());
}

void transferCells(const model::RunModel& model, const FindHit& h) {
  const auto& t = model.transfers[h.index];
  ImGui::Text("%d / %d", t.iteration, t.microbatch);
  ImGui::TableSetColumnIndex(2);
  ImGui::Text("%s %s %s", events::toString(t.side), t.edge.c_str(), events::toString(t.direction));
  ImGui::TableSetColumnIndex(3);
  ImGui::Text("r%d -> r%d  %s  %s", t.srcRank, t.dstRank, formatShape(t.shape).c_str(),
              hex64(t.checksum).c_str());
  ImGui::TableSetColumnIndex(4);
  ImGui::TextUnformatted(formatDuration(static_cast<double>(t.startNs - model.minTimeNs)).c_str());
}

void gradientCells(const model::RunModel& model, const FindHit& h) {
  const auto& g = model.gradients[h.index];
  ImGui::Text("%d / %d", g.iteration, g.microbatch);
  ImGui::TableSetColumnIndex(2);
  ImGui::Text("%s %s", g.param.c_str(), events::toString(g.phase));
  ImGui::TableSetColumnIndex(3);
  ImGui::Text("tp%d pp%d dp%d  norm %s", g.tp, g.pp, g.dp, analysis::formatValue(g.norm).c_str());
}

bool beginHitsTable() {
  if (!ImGui::BeginTable(
          "##found", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV))
    return false;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("rank", ImGuiTableColumnFlags_WidthFixed, 60);
  ImGui::TableSetupColumn("it / mb", ImGuiTableColumnFlags_WidthFixed, 80);
  ImGui::TableSetupColumn("what", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("time", ImGuiTableColumnFlags_WidthFixed, 110);
  ImGui::TableHeadersRow();
  return true;
}

}  // namespace

void FindPanel::draw(PanelContext& p) {
  const LoadedRun* run = p.main.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  const auto& model = run->model;
  FindQuery& q = p.view.find;
  if (findFilters(model, q, &focus_)) p.view.findDirty = true;
  // Gradients, and NaN/Inf in causal order (gradients and losses take part), are details.
  if ((q.what == FindWhat::Gradients || q.nanInf) && drawDetailsPending(p, "find")) return;
  if (p.view.findDirty) {
    p.view.findHits = findItems(model, q, 20000, &p.view.findTotal, &run->replay);
    p.view.findDirty = false;
  }
  ImGui::TextDisabled("%zu matches%s  (-1 = any)%s", p.view.findTotal,
                      p.view.findTotal > p.view.findHits.size() ? ", first 20000 listed" : "",
                      q.nanInf && q.what != FindWhat::Actions
                          ? "  in causal order: the first row is where NaN/Inf appeared"
                          : "");
  if (!beginHitsTable()) return;
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(p.view.findHits.size()));
  while (clip.Step()) {
    for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
      const FindHit& h = p.view.findHits[r];
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      char label[32];
      std::snprintf(label, sizeof label, "r%d##f%d", h.rank, r);
      const Selection s = selectionOf(h);
      if (ImGui::Selectable(label, p.view.selection == s, ImGuiSelectableFlags_SpanAllColumns))
        p.nav.select(s, true);
      ImGui::TableSetColumnIndex(1);
      if (h.what == FindWhat::Actions)
        actionCells(model, h);
      else if (h.what == FindWhat::Transfers)
        transferCells(model, h);
      else
        gradientCells(model, h);
    }
  }
  ImGui::EndTable();
}

}  // namespace stagescope::ui
