// The grid map: each module's TP x PP x DP layout at its rank offset, bridges between modules,
// and every rank's state at the current replay step.  A colocated rank appears in the grid of
// every module it holds, each cell with a "shared w/" line naming (and coloured as) the others.
#include "ui/GridMap.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "ui/ActionTransfers.h"
#include "ui/Formatting.h"
#include "ui/Theme.h"

namespace stagescope::ui {

// What the grid map's painters share in one frame: the run, the replay step, the cells' size,
// and where each module's box is.
struct GridMapContext {
  ImDrawList* dl = nullptr;
  const LoadedRun* run = nullptr;
  ImVec2 origin;
  int64_t step = 0;
  float cellW = 92, cellH = 46, gap = 6;
  std::vector<ImVec4> boxes;                         // per module: x0, y0, x1, y1
  float llmColumnX = 0;                              // the second column's left (the llm's box)
  std::map<std::pair<int, int>, ImVec2> cellCentre;  // (rank, module) -> centre

  const model::RunModel& model() const { return run->model; }
  const std::vector<events::ModuleInfo>& modules() const { return run->model.info.modules; }
  int moduleIndex(const std::string& name) const {
    for (size_t i = 0; i < modules().size(); ++i)
      if (modules()[i].name == name) return static_cast<int>(i);
    return -1;
  }
};

namespace {

struct CellState {
  std::string line1, line2;
  ImU32 fill = theme::kCellIdle;
  bool waiting = false;
  bool fate = false;  // the cell shows how an unfinished rank ended
};

using K = events::ActionKind;

bool isWait(K k) {
  return k == K::RecvForward || k == K::RecvBackward || k == K::DpReduce ||
         k == K::SendForwardRecvBackward || k == K::SendBackwardRecvForward;
}

// The peers whose send to `rank`'s running action has not begun yet ("r1,r2"; "dp group" for
// a reduction that waits on no message).
std::string waitedPeers(const GridMapContext& g, int rank, int32_t action, K kind) {
  const auto& model = g.model();
  std::string waits;
  for (int64_t ti : transfersOfAction(model, rank, action)) {
    int32_t p = g.run->transferPair[ti];
    if (p < 0 || model.transfers[ti].side != events::Side::Recv) continue;
    const PairActions& pa = g.run->pairActions[p];
    if (pa.sendAction < 0 || g.run->replay.positionOf(pa.sendRank, pa.sendAction, false) >= g.step)
      waits += (waits.empty() ? "r" : ",r") + std::to_string(model.transfers[ti].srcRank);
  }
  if (waits.empty() && kind == K::DpReduce) waits = "dp group";
  return waits;
}

// A running rank's cell: its action, in its module's colour; a receive waiting on peers.
// `cellModule`: the module whose grid the cell belongs to; a colocated rank's running action
// may be another module's (named then).
void runningState(const GridMapContext& g, int rank, int cellModule, const RankReplayState& st,
                  CellState& c) {
  const auto& a = g.model().actions[rank][st.done];
  char buf[64];
  int mi = cellModule;
  if (!a.module.empty() && g.moduleIndex(a.module) >= 0) mi = g.moduleIndex(a.module);
  if (a.kind == K::Forward || a.kind == K::Backward) {
    std::snprintf(buf, sizeof buf, "%s mb%d", a.kind == K::Forward ? "F" : "B", a.microbatch);
    c.fill = theme::moduleColour(mi, a.kind == K::Backward);
  } else if (isWait(a.kind)) {
    const std::string waits = waitedPeers(g, rank, st.done, a.kind);
    if (!waits.empty()) {
      std::snprintf(buf, sizeof buf, "wait %s", waits.c_str());
      c.fill = theme::kCellWaiting;
      c.waiting = true;
    } else {
      std::snprintf(buf, sizeof buf, "%s%s", events::toString(a.kind),
                    microbatchSuffix(a.microbatch).c_str());
      c.fill = theme::kCellCommunicating;
    }
  } else {
    std::snprintf(buf, sizeof buf, "%s%s", events::toString(a.kind),
                  microbatchSuffix(a.microbatch).c_str());
    c.fill = theme::actionColour(mi, static_cast<int>(a.kind));
  }
  if (mi != cellModule && mi >= 0 && !c.waiting) {
    const std::string what = buf;  // the rank runs another of its modules now
    std::snprintf(buf, sizeof buf, "%s %s", what.c_str(), g.modules()[mi].name.c_str());
  }
  c.line1 = buf;
}

CellState cellState(const GridMapContext& g, int rank, int cellModule) {
  CellState c;
  const auto& model = g.model();
  if (rank < 0 || rank >= static_cast<int>(model.actions.size())) return c;
  const auto& acts = model.actions[rank];
  const RankReplayState st = g.run->replay.stateAt(rank, g.step);
  const bool ended = st.done >= static_cast<int32_t>(acts.size());
  if (st.running && !ended) {
    runningState(g, rank, cellModule, st, c);
  } else if (ended && !g.run->detailsLoaded) {
    c.line1 = "loading...";  // how the rank ended needs its plan (a detail): no word until in
  } else if (ended && g.run->fateOf(rank)->fate != RankFate::Completed) {
    // After its last recorded action: how the rank ended (never "finished" unless it did).
    const RankProblem& p = *g.run->fateOf(rank);
    std::string word = toString(p.fate);
    for (char& ch : word) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (p.waitsOnRank >= 0) word += " on r" + std::to_string(p.waitsOnRank);
    c.line1 = word;
    c.fill = theme::fateColour(p.fate);
    c.fate = true;
  } else if (ended && !acts.empty()) {
    c.line1 = "finished";
    c.fill = theme::kCellFinished;
  } else {
    c.line1 = "idle";
  }
  c.line2 = "act " + std::to_string(g.run->replay.storedActivations(rank, g.step));
  return c;
}

// Layout: encoders stacked in the first column, the llm (sinks) to their right.
void layoutGrid(GridMapContext& g) {
  const auto& modules = g.modules();
  g.boxes.assign(modules.size(), ImVec4());
  float encBottom = g.origin.y + 6;
  float maxEncW = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    float w = m.pp * (g.cellW + g.gap) + 16;
    float h = m.dp * m.tp * (g.cellH + g.gap) + (m.dp - 1) * 6 + 30;
    if (!m.isLlm()) maxEncW = std::max(maxEncW, w);
    g.boxes[i] = ImVec4(0, 0, w, h);
  }
  g.llmColumnX = g.origin.x + 10 + maxEncW + (maxEncW > 0 ? 90 : 0);
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    float x = m.isLlm() ? g.llmColumnX : g.origin.x + 10;
    float y = m.isLlm() ? g.origin.y + 6 : encBottom;
    if (!m.isLlm()) encBottom += g.boxes[i].w + 10;
    g.boxes[i] = ImVec4(x, y, x + g.boxes[i].z, y + g.boxes[i].w);
  }
}

// Stored activations as pips along the cell's bottom, and their count.
void drawStoredPips(const GridMapContext& g, ImVec2 c0, int stored, ImU32 tc) {
  for (int k = 0; k < std::min(stored, 12); ++k)
    g.dl->AddRectFilled(ImVec2(c0.x + 4 + k * 7, c0.y + g.cellH - 9),
                        ImVec2(c0.x + 9 + k * 7, c0.y + g.cellH - 4), theme::kStoredPip, 1);
  if (stored > 0) {
    char n[16];
    std::snprintf(n, sizeof n, "%d", stored);
    g.dl->AddText(ImVec2(c0.x + g.cellW - 16, c0.y + g.cellH - 17), tc, n);
  }
}

// Bridges: encoder last-stage leaders (tp = T-1) to llm first-stage leaders (tp = 0).
void drawBridge(const GridMapContext& g, size_t i, const events::ModuleInfo& dst) {
  const auto& m = g.modules()[i];
  for (const auto& ri : g.model().ranks) {
    if (ri.module != m.name || ri.pp != m.pp - 1 || ri.tp != m.tp - 1) continue;
    for (const auto& rj : g.model().ranks) {
      if (rj.module != dst.name || rj.pp != 0 || rj.tp != 0) continue;
      bool linked = m.dp >= dst.dp ? rj.dp == ri.dp / std::max(1, m.dp / dst.dp)
                                   : ri.dp == rj.dp / std::max(1, dst.dp / m.dp);
      if (!linked) continue;
      auto ca = g.cellCentre.find({ri.rank, static_cast<int>(i)});
      auto cb = g.cellCentre.find({rj.rank, g.moduleIndex(dst.name)});
      if (ca == g.cellCentre.end() || cb == g.cellCentre.end()) continue;
      ImVec2 a = ca->second, b = cb->second;
      a.x += g.cellW / 2;
      b.x -= g.cellW / 2;
      g.dl->AddBezierCubic(a, ImVec2(a.x + 40, a.y), ImVec2(b.x - 40, b.y), b, theme::kBridge,
                           2.0f);
      g.dl->AddTriangleFilled(b, ImVec2(b.x - 8, b.y - 4), ImVec2(b.x - 8, b.y + 4),
                              theme::kBridge);
      if (ri.rank == rj.rank)  // both ends on one rank: a local hand-off, no wire
        g.dl->AddText(ImVec2((a.x + b.x) / 2 - 14, (a.y + b.y) / 2 - 16), theme::kBridge, "local");
    }
  }
  const char* role = m.dp > dst.dp ? "fan-in" : (m.dp < dst.dp ? "fan-out" : "1:1");
  char label[64];
  std::snprintf(label, sizeof label, "%s->%s  %s %d:%d", m.name.c_str(), dst.name.c_str(), role,
                m.dp, dst.dp);
  g.dl->AddText(ImVec2(g.boxes[i].z + 6, g.boxes[i].w + 4), theme::kBridge, label);
}

void drawBridges(const GridMapContext& g) {
  const auto& modules = g.modules();
  for (size_t i = 0; i < modules.size(); ++i) {
    for (const auto& down : modules[i].downstream) {
      const events::ModuleInfo* dst = nullptr;
      for (const auto& o : modules)
        if (o.name == down) dst = &o;
      if (dst) drawBridge(g, i, *dst);
    }
  }
}

// Returns the legend's bottom-right corner.
ImVec2 drawLegend(const GridMapContext& g) {
  const auto& modules = g.modules();
  float lx = g.llmColumnX + 20;
  for (size_t i = 0; i < modules.size(); ++i)
    if (modules[i].isLlm()) lx = std::max(lx, g.boxes[i].z + 30);
  float ly = g.origin.y + 10, right = lx;
  auto legend = [&](ImU32 c, const char* text) {
    g.dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + 14, ly + 14), c, 2);
    g.dl->AddText(ImVec2(lx + 20, ly - 1), theme::kText, text);
    right = std::max(right, lx + 20 + ImGui::CalcTextSize(text).x);
    ly += 20;
  };
  legend(theme::moduleColour(0, false), "forward (module colour)");
  legend(theme::moduleColour(0, true), "backward (darker)");
  legend(theme::kCellWaiting, "waiting on a peer");
  legend(theme::kCellCommunicating, "communicating");
  legend(theme::kCellIdle, "idle");
  legend(theme::fateColour(RankFate::Killed), "killed / failed");
  legend(theme::fateColour(RankFate::Hung), "hung (timed out waiting)");
  legend(theme::fateColour(RankFate::Stopped), "stopped / unfinished");
  legend(theme::kStoredPip, "stored activations (F done - B done)");
  return ImVec2(right, ly);
}

// The painters: a module's box of cells, one cell (`head`: its first line), a colocated
// rank's dots naming its other modules.
void drawSharedCellDots(PanelContext& panel, const GridMapContext& g, size_t module, int rank,
                        ImVec2 c0, ImVec2 c1, ImU32 tc) {
  // Shared with the rank's other modules: a dot in each one's colour at the top right corner,
  // their names on a third line.
  const auto& m = g.modules()[module];
  std::string others;
  float dx = c1.x - 12;
  for (const auto& o : g.model().modulesOf(rank)) {
    if (o.module == m.name) continue;
    const ImU32 oc = theme::moduleColour(g.moduleIndex(o.module), false);
    const ImVec4 dot(dx, c0.y + 4, dx + 8, c0.y + 12);
    g.dl->AddRectFilled(ImVec2(dot.x, dot.y), ImVec2(dot.z, dot.w), oc, 2);
    g.dl->AddRect(ImVec2(dot.x - 1, dot.y - 1), ImVec2(dot.z + 1, dot.w + 1), theme::kDotOutline,
                  2);
    if (panel.probes.sharedCells.size() < 32) panel.probes.sharedCells.push_back({rank, dot, oc});
    dx -= 11;
    others += (others.empty() ? "" : ",") + o.module;
  }
  g.dl->PushClipRect(c0, c1, true);
  g.dl->AddText(ImVec2(c0.x + 4, c0.y + 30), tc, ("shared w/ " + others).c_str());
  g.dl->PopClipRect();
}

void drawGridCell(PanelContext& panel, GridMapContext& g, size_t module, int rank, ImVec2 c0,
                  const char* head) {
  ImDrawList* dl = g.dl;
  const auto& model = g.model();
  const ImVec2 c1(c0.x + g.cellW, c0.y + g.cellH);
  const CellState cs = cellState(g, rank, static_cast<int>(module));
  dl->AddRectFilled(c0, c1, cs.fill, 3);
  const bool sel = rank >= 0 && panel.view.selection.rank == rank;
  dl->AddRect(c0, c1, sel ? theme::kAccent : theme::kCellBorder, 3, 0, sel ? 2.0f : 1.0f);
  const ImU32 tc = theme::textOn(cs.fill);
  dl->AddText(ImVec2(c0.x + 4, c0.y + 2), tc, head);
  dl->AddText(ImVec2(c0.x + 4, c0.y + 16), tc, cs.line1.c_str());
  const int stored = rank >= 0 ? g.run->replay.storedActivations(rank, g.step) : 0;
  drawStoredPips(g, c0, stored, tc);
  if (rank >= 0)
    g.cellCentre[{rank, static_cast<int>(module)}] = ImVec2(c0.x + g.cellW / 2, c0.y + g.cellH / 2);
  if (rank >= 0 && model.colocated(rank)) drawSharedCellDots(panel, g, module, rank, c0, c1, tc);
  ImGui::SetCursorScreenPos(c0);
  ImGui::PushID(rank);
  if (ImGui::InvisibleButton("##cell", ImVec2(g.cellW, g.cellH)) && rank >= 0) {
    RankReplayState st = g.run->replay.stateAt(rank, g.step);
    int64_t a = std::min<int64_t>(st.done, static_cast<int64_t>(model.actions[rank].size()) - 1);
    if (a >= 0) panel.nav.select({Selection::Kind::Action, rank, a}, true);
  }
  if (cs.fate) {
    dl->AddRect(ImVec2(c0.x - 2, c0.y - 2), ImVec2(c1.x + 2, c1.y + 2), cs.fill, 4, 0, 2.5f);
    panel.probes.cells.push_back({rank, ImVec4(c0.x, c0.y, c1.x, c1.y), cs.fill});
  }
  if (ImGui::IsItemHovered() && rank < 0)
    ImGui::SetTooltip(
        "no rank recorded this cell: its records are not in the run file\n"
        "(an interrupted run: `stagescope merge RUN` merges what its shards hold)");
  if (ImGui::IsItemHovered() && rank >= 0)
    ImGui::SetTooltip(
        "rank %d  %s%s\n%s%s%s\nstored activations: %d", rank,
        model.colocated(rank) ? "shared: " : "",
        model.colocated(rank) ? model.moduleLabel(rank).c_str() : g.modules()[module].name.c_str(),
        cs.line1.c_str(), cs.fate ? "\n" : "", cs.fate ? g.run->fateOf(rank)->why.c_str() : "",
        stored);
  ImGui::PopID();
}

void drawGridModule(PanelContext& panel, GridMapContext& g, size_t i) {
  const auto& m = g.modules()[i];
  const ImVec4 b = g.boxes[i];
  g.dl->AddRectFilled(ImVec2(b.x, b.y), ImVec2(b.z, b.w), theme::kGridModuleBox, 4);
  g.dl->AddRect(ImVec2(b.x, b.y), ImVec2(b.z, b.w),
                theme::moduleColour(static_cast<int>(i), false, 0.8f), 4, 0, 1.5f);
  char title[128];
  std::snprintf(title, sizeof title, "%s  tp%d x pp%d x dp%d  @%d", m.name.c_str(), m.tp, m.pp,
                m.dp, m.offset);
  g.dl->AddText(ImVec2(b.x + 8, b.y + 5), theme::kText, title);
  for (int d = 0; d < m.dp; ++d) {
    for (int p = 0; p < m.pp; ++p) {
      for (int t = 0; t < m.tp; ++t) {
        int rank = -1;
        for (const auto& ri : g.model().ranks)
          if (ri.module == m.name && ri.tp == t && ri.pp == p && ri.dp == d) rank = ri.rank;
        const float x0 = b.x + 8 + p * (g.cellW + g.gap);
        const float y0 = b.y + 26 + (d * m.tp + t) * (g.cellH + g.gap) + d * 6;
        // A cell no rank recorded (an unmerged or partial run file) has no rank number to show:
        // "r?", never "r-1"; hovering it says how to recover the rank's records.
        char head[64];
        if (rank >= 0)
          std::snprintf(head, sizeof head, "r%d  t%d p%d d%d", rank, t, p, d);
        else
          std::snprintf(head, sizeof head, "r?  t%d p%d d%d", t, p, d);
        panel.probes.gridHeads.push_back(head);
        drawGridCell(panel, g, i, rank, ImVec2(x0, y0), head);
      }
    }
  }
}

}  // namespace

void drawGridMap(PanelContext& panel) {
  const LoadedRun* run = panel.main.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  GridMapContext g;
  g.dl = ImGui::GetWindowDrawList();
  g.run = run;
  g.origin = ImGui::GetCursorScreenPos();
  g.step = panel.view.step;
  panel.probes.gridMap =
      ImVec4(g.origin.x, g.origin.y, g.origin.x + ImGui::GetContentRegionAvail().x,
             g.origin.y + ImGui::GetContentRegionAvail().y);
  bool anyShared = false;
  for (const auto& ri : run->model.ranks) anyShared |= run->model.colocated(ri.rank);
  // Cells of a run with colocated ranks are larger: a third line names the other modules.
  g.cellW = anyShared ? 150 : 92;
  g.cellH = anyShared ? 60 : 46;
  layoutGrid(g);
  for (size_t i = 0; i < g.modules().size(); ++i) drawGridModule(panel, g, i);
  drawBridges(g);
  // The map's extent (module boxes, the bridge labels below them, the legend) is laid out as
  // one item, so that a grid taller or wider than the panel scrolls instead of running off it.
  ImVec2 extent = drawLegend(g);
  for (const ImVec4& b : g.boxes) extent = ImVec2(std::max(extent.x, b.z), std::max(extent.y, b.w));
  extent.y += ImGui::GetTextLineHeightWithSpacing() + 4;  // a bridge's label under its box
  ImGui::SetCursorScreenPos(g.origin);
  ImGui::Dummy(ImVec2(extent.x - g.origin.x + 8, extent.y - g.origin.y));
  panel.probes.gridMapContent =
      ImVec4(extent.x, extent.y, ImGui::GetScrollMaxX(), ImGui::GetScrollMaxY());
}

}  // namespace stagescope::ui
