// The grid map: each module's TP x PP x DP layout at its rank offset, bridges between modules,
// and every rank's state at the current replay step.  A colocated rank appears in the grid of
// every module it holds, each cell with a "shared w/" line naming (and coloured as) the others.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "ui/App.h"

namespace stagescope::ui {
namespace {

struct CellState {
  std::string line1, line2;
  ImU32 fill = IM_COL32(48, 51, 58, 255);
  bool waiting = false;
  bool fate = false;  // the cell shows how an unfinished rank ended
};

}  // namespace

void App::drawGridMap() {
  const LoadedRun* run = main_.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  const auto& model = run->model;
  const auto& modules = model.info.modules;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  probes_.gridMap = ImVec4(origin.x, origin.y, origin.x + ImGui::GetContentRegionAvail().x,
                           origin.y + ImGui::GetContentRegionAvail().y);
  const int64_t step = view_.step;
  bool anyShared = false;
  for (const auto& ri : model.ranks) anyShared |= model.colocated(ri.rank);
  // Cells of a run with colocated ranks are larger: a third line names the other modules.
  const float cellW = anyShared ? 150 : 92, cellH = anyShared ? 60 : 46, gap = 6;
  auto moduleIndex = [&](const std::string& name) {
    for (size_t i = 0; i < modules.size(); ++i)
      if (modules[i].name == name) return static_cast<int>(i);
    return -1;
  };

  // `cellModule`: the module whose grid the cell belongs to; a colocated rank's running action
  // may be another module's (named then).
  auto stateOf = [&](int rank, int cellModule) {
    CellState c;
    if (rank < 0 || rank >= static_cast<int>(model.actions.size())) return c;
    const auto& acts = model.actions[rank];
    RankReplayState st = run->replay.stateAt(rank, step);
    int stored = run->replay.storedActivations(rank, step);
    char buf[64];
    int mi = cellModule;
    if (st.running && st.done < static_cast<int32_t>(acts.size())) {
      const auto& a = acts[st.done];
      if (!a.module.empty() && moduleIndex(a.module) >= 0) mi = moduleIndex(a.module);
      using K = events::ActionKind;
      if (a.kind == K::Forward || a.kind == K::Backward) {
        std::snprintf(buf, sizeof buf, "%s mb%d", a.kind == K::Forward ? "F" : "B", a.microbatch);
        c.fill = theme::moduleColour(mi, a.kind == K::Backward);
      } else if (a.kind == K::RecvForward || a.kind == K::RecvBackward || a.kind == K::DpReduce ||
                 a.kind == K::SendForwardRecvBackward || a.kind == K::SendBackwardRecvForward) {
        // Waiting: name the peers whose send has not begun yet.
        std::string waits;
        for (int64_t ti : transfersOfAction(model, rank, st.done)) {
          int32_t p = run->transferPair[ti];
          if (p < 0 || model.transfers[ti].side != events::Side::Recv) continue;
          const PairActions& pa = run->pairActions[p];
          if (pa.sendAction < 0 ||
              run->replay.positionOf(pa.sendRank, pa.sendAction, false) >= step)
            waits += (waits.empty() ? "r" : ",r") + std::to_string(model.transfers[ti].srcRank);
        }
        if (waits.empty() && a.kind == K::DpReduce) waits = "dp group";
        if (!waits.empty()) {
          std::snprintf(buf, sizeof buf, "wait %s", waits.c_str());
          c.fill = IM_COL32(150, 105, 30, 255);
          c.waiting = true;
        } else {
          std::snprintf(buf, sizeof buf, "%s mb%d", events::toString(a.kind), a.microbatch);
          c.fill = IM_COL32(80, 92, 110, 255);
        }
      } else {
        std::snprintf(buf, sizeof buf, "%s mb%d", events::toString(a.kind), a.microbatch);
        c.fill = theme::actionColour(mi, static_cast<int>(a.kind));
      }
      if (mi != cellModule && mi >= 0 && !c.waiting) {
        const std::string what = buf;  // the rank runs another of its modules now
        std::snprintf(buf, sizeof buf, "%s %s", what.c_str(), modules[mi].name.c_str());
      }
    } else if (st.done >= static_cast<int32_t>(acts.size()) && !run->detailsLoaded) {
      // How the rank ended needs its plan (a detail): no word until it is in.
      std::snprintf(buf, sizeof buf, "loading...");
    } else if (st.done >= static_cast<int32_t>(acts.size()) &&
               run->fateOf(rank)->fate != RankFate::Completed) {
      // After its last recorded action: how the rank ended (never "finished" unless it did).
      const RankProblem& p = *run->fateOf(rank);
      std::string word = toString(p.fate);
      for (char& ch : word) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      if (p.waitsOnRank >= 0) word += " on r" + std::to_string(p.waitsOnRank);
      std::snprintf(buf, sizeof buf, "%s", word.c_str());
      c.fill = theme::fateColour(p.fate);
      c.fate = true;
    } else if (st.done >= static_cast<int32_t>(acts.size()) && !acts.empty()) {
      std::snprintf(buf, sizeof buf, "finished");
      c.fill = IM_COL32(40, 60, 46, 255);
    } else {
      std::snprintf(buf, sizeof buf, "idle");
    }
    c.line1 = buf;
    std::snprintf(buf, sizeof buf, "act %d", stored);
    c.line2 = buf;
    return c;
  };

  // Layout: encoders stacked in the first column, the llm (sinks) to their right.
  std::map<std::string, ImVec2> leaderPos;  // "rank" -> cell centre
  std::vector<ImVec4> boxes(modules.size());
  float colX[2] = {origin.x + 10, origin.x + 10};
  float encBottom = origin.y + 6;
  float maxEncW = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    float w = m.pp * (cellW + gap) + 16;
    float h = m.dp * m.tp * (cellH + gap) + (m.dp - 1) * 6 + 30;
    if (m.kind != "llm") maxEncW = std::max(maxEncW, w);
    boxes[i] = ImVec4(0, 0, w, h);
  }
  colX[1] = origin.x + 10 + maxEncW + (maxEncW > 0 ? 90 : 0);
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    float x = m.kind == "llm" ? colX[1] : colX[0];
    float y = m.kind == "llm" ? origin.y + 6 : encBottom;
    if (m.kind != "llm") encBottom += boxes[i].w + 10;
    boxes[i] = ImVec4(x, y, x + boxes[i].z, y + boxes[i].w);
  }
  std::map<std::pair<int, int>, ImVec2> cellCentre;  // (rank, module) -> centre
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    const ImVec4 b = boxes[i];
    dl->AddRectFilled(ImVec2(b.x, b.y), ImVec2(b.z, b.w), IM_COL32(36, 38, 44, 255), 4);
    dl->AddRect(ImVec2(b.x, b.y), ImVec2(b.z, b.w),
                theme::moduleColour(static_cast<int>(i), false, 0.8f), 4, 0, 1.5f);
    char title[128];
    std::snprintf(title, sizeof title, "%s  tp%d x pp%d x dp%d  @%d", m.name.c_str(), m.tp, m.pp,
                  m.dp, m.offset);
    dl->AddText(ImVec2(b.x + 8, b.y + 5), theme::kText, title);
    for (int d = 0; d < m.dp; ++d) {
      for (int p = 0; p < m.pp; ++p) {
        for (int t = 0; t < m.tp; ++t) {
          int rank = -1;
          for (const auto& ri : model.ranks)
            if (ri.module == m.name && ri.tp == t && ri.pp == p && ri.dp == d) rank = ri.rank;
          float x0 = b.x + 8 + p * (cellW + gap);
          float y0 = b.y + 26 + (d * m.tp + t) * (cellH + gap) + d * 6;
          ImVec2 c0(x0, y0), c1(x0 + cellW, y0 + cellH);
          CellState cs = stateOf(rank, static_cast<int>(i));
          dl->AddRectFilled(c0, c1, cs.fill, 3);
          bool sel = rank >= 0 && view_.selection.rank == rank;
          dl->AddRect(c0, c1, sel ? theme::kAccent : IM_COL32(75, 80, 90, 255), 3, 0,
                      sel ? 2.0f : 1.0f);
          ImU32 tc = theme::textOn(cs.fill);
          char head[48];
          std::snprintf(head, sizeof head, "r%d  t%d p%d d%d", rank, t, p, d);
          dl->AddText(ImVec2(x0 + 4, y0 + 2), tc, head);
          dl->AddText(ImVec2(x0 + 4, y0 + 16), tc, cs.line1.c_str());
          // Stored activations as pips.
          int stored = rank >= 0 ? run->replay.storedActivations(rank, step) : 0;
          for (int k = 0; k < std::min(stored, 12); ++k)
            dl->AddRectFilled(ImVec2(x0 + 4 + k * 7, y0 + cellH - 9),
                              ImVec2(x0 + 9 + k * 7, y0 + cellH - 4), IM_COL32(255, 210, 90, 230),
                              1);
          if (stored > 0) {
            char n[16];
            std::snprintf(n, sizeof n, "%d", stored);
            dl->AddText(ImVec2(x0 + cellW - 16, y0 + cellH - 17), tc, n);
          }
          if (rank >= 0)
            cellCentre[{rank, static_cast<int>(i)}] = ImVec2(x0 + cellW / 2, y0 + cellH / 2);
          if (rank >= 0 && model.colocated(rank)) {
            // Shared with the rank's other modules: a dot in each one's colour and their names.
            // dots at the top right corner, names on a third line.
            std::string others;
            float dx = c1.x - 12;
            for (const auto& o : model.modulesOf(rank)) {
              if (o.module == m.name) continue;
              const ImU32 oc = theme::moduleColour(moduleIndex(o.module), false);
              const ImVec4 dot(dx, y0 + 4, dx + 8, y0 + 12);
              dl->AddRectFilled(ImVec2(dot.x, dot.y), ImVec2(dot.z, dot.w), oc, 2);
              dl->AddRect(ImVec2(dot.x - 1, dot.y - 1), ImVec2(dot.z + 1, dot.w + 1),
                          IM_COL32(20, 20, 24, 255), 2);
              if (probes_.sharedCells.size() < 32) probes_.sharedCells.push_back({rank, dot, oc});
              dx -= 11;
              others += (others.empty() ? "" : ",") + o.module;
            }
            dl->PushClipRect(c0, c1, true);
            dl->AddText(ImVec2(x0 + 4, y0 + 30), tc, ("shared w/ " + others).c_str());
            dl->PopClipRect();
          }
          ImGui::SetCursorScreenPos(c0);
          ImGui::PushID(rank);
          if (ImGui::InvisibleButton("##cell", ImVec2(cellW, cellH)) && rank >= 0) {
            RankReplayState st = run->replay.stateAt(rank, step);
            int64_t a =
                std::min<int64_t>(st.done, static_cast<int64_t>(model.actions[rank].size()) - 1);
            if (a >= 0) select({Selection::Kind::Action, rank, a}, true);
          }
          if (cs.fate) {
            dl->AddRect(ImVec2(c0.x - 2, c0.y - 2), ImVec2(c1.x + 2, c1.y + 2), cs.fill, 4, 0,
                        2.5f);
            probes_.cells.push_back({rank, ImVec4(c0.x, c0.y, c1.x, c1.y), cs.fill});
          }
          if (ImGui::IsItemHovered() && rank >= 0)
            ImGui::SetTooltip(
                "rank %d  %s%s\n%s%s%s\nstored activations: %d", rank,
                model.colocated(rank) ? "shared: " : "",
                model.colocated(rank) ? model.moduleLabel(rank).c_str() : m.name.c_str(),
                cs.line1.c_str(), cs.fate ? "\n" : "",
                cs.fate ? run->fateOf(rank)->why.c_str() : "", stored);
          ImGui::PopID();
        }
      }
    }
  }
  // Bridges: encoder last-stage leaders (tp = T-1) to llm first-stage leaders (tp = 0).
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& m = modules[i];
    for (const auto& down : m.downstream) {
      const events::ModuleInfo* dst = nullptr;
      for (const auto& o : modules)
        if (o.name == down) dst = &o;
      if (!dst) continue;
      for (const auto& ri : model.ranks) {
        if (ri.module != m.name || ri.pp != m.pp - 1 || ri.tp != m.tp - 1) continue;
        for (const auto& rj : model.ranks) {
          if (rj.module != dst->name || rj.pp != 0 || rj.tp != 0) continue;
          bool linked = m.dp >= dst->dp ? rj.dp == ri.dp / std::max(1, m.dp / dst->dp)
                                        : ri.dp == rj.dp / std::max(1, dst->dp / m.dp);
          if (!linked) continue;
          auto ca = cellCentre.find({ri.rank, static_cast<int>(i)});
          auto cb = cellCentre.find({rj.rank, moduleIndex(dst->name)});
          if (ca == cellCentre.end() || cb == cellCentre.end()) continue;
          ImVec2 a = ca->second, b = cb->second;
          a.x += cellW / 2;
          b.x -= cellW / 2;
          dl->AddBezierCubic(a, ImVec2(a.x + 40, a.y), ImVec2(b.x - 40, b.y), b, theme::kBridge,
                             2.0f);
          dl->AddTriangleFilled(b, ImVec2(b.x - 8, b.y - 4), ImVec2(b.x - 8, b.y + 4),
                                theme::kBridge);
          if (ri.rank == rj.rank)  // both ends on one rank: a local hand-off, no wire
            dl->AddText(ImVec2((a.x + b.x) / 2 - 14, (a.y + b.y) / 2 - 16), theme::kBridge,
                        "local");
        }
      }
      const char* role = m.dp > dst->dp ? "fan-in" : (m.dp < dst->dp ? "fan-out" : "1:1");
      char label[64];
      std::snprintf(label, sizeof label, "%s->%s  %s %d:%d", m.name.c_str(), dst->name.c_str(),
                    role, m.dp, dst->dp);
      dl->AddText(ImVec2(boxes[i].z + 6, boxes[i].w + 4), theme::kBridge, label);
    }
  }
  // Legend.
  float lx = colX[1] + 20;
  for (size_t i = 0; i < modules.size(); ++i)
    if (modules[i].kind == "llm") lx = std::max(lx, boxes[i].z + 30);
  float ly = origin.y + 10;
  auto legend = [&](ImU32 c, const char* text) {
    dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + 14, ly + 14), c, 2);
    dl->AddText(ImVec2(lx + 20, ly - 1), theme::kText, text);
    ly += 20;
  };
  legend(theme::moduleColour(0, false), "forward (module colour)");
  legend(theme::moduleColour(0, true), "backward (darker)");
  legend(IM_COL32(150, 105, 30, 255), "waiting on a peer");
  legend(IM_COL32(80, 92, 110, 255), "communicating");
  legend(IM_COL32(48, 51, 58, 255), "idle");
  legend(theme::fateColour(RankFate::Killed), "killed / failed");
  legend(theme::fateColour(RankFate::Hung), "hung (timed out waiting)");
  legend(theme::fateColour(RankFate::Stopped), "stopped / unfinished");
  legend(IM_COL32(255, 210, 90, 230), "stored activations (F done - B done)");
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace stagescope::ui
