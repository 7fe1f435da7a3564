// The status banner under the menu bar: how the run ended (completed / failed / hung / killed,
// with the recorded reason), whether values went non-finite, and one-click buttons to the
// problems in causal order: the first NaN/Inf, the stuck rank, the first divergence.
#include "ui/StatusBanner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "ui/DetailsPending.h"
#include "ui/FitText.h"
#include "ui/Theme.h"

namespace stagescope::ui {
namespace {

std::string describe(const model::RunModel& m, const NonFinite& n) {
  char buf[256];
  switch (n.kind) {
    case NonFinite::Kind::Transfer: {
      const auto& t = m.transfers[n.index];
      std::snprintf(buf, sizeof buf, "%s %s it%d mb%d (rank %d %s)", t.edge.c_str(),
                    events::toString(t.direction), t.iteration, t.microbatch, t.rank,
                    events::toString(t.side));
      return buf;
    }
    case NonFinite::Kind::Gradient: {
      const auto& g = m.gradients[n.index];
      std::snprintf(buf, sizeof buf, "%s %s it%d mb%d (rank %d)", g.param.c_str(),
                    events::toString(g.phase), g.iteration, g.microbatch, g.rank);
      return buf;
    }
    case NonFinite::Kind::Loss: {
      const auto& l = m.losses[n.index];
      std::snprintf(buf, sizeof buf, "loss it%d mb%d (rank %d)", l.iteration, l.microbatch, l.rank);
      return buf;
    }
    case NonFinite::Kind::None:
      break;
  }
  return "";
}

// The banner's sentence for a live run: the CLI's line, and what the view is.
std::string liveNote(const std::string& live) {
  return live + ": a snapshot of what the ranks had committed; reopen the run to see more";
}

const char* statusWord(events::RunStatus s) {
  switch (s) {
    case events::RunStatus::Completed:
      return "COMPLETED";
    case events::RunStatus::Failed:
      return "FAILED";
    case events::RunStatus::Hung:
      return "HUNG";
    case events::RunStatus::Killed:
      return "KILLED";
    case events::RunStatus::Running:
      break;
  }
  return "NOT FINISHED";
}

// How the run ended, in words: the live note, the completed ranks or the recorded reason.
std::string statusSentence(const LoadedRun& run) {
  const auto& m = run.model;
  if (!run.live.empty()) return liveNote(run.live);
  if (m.info.status == events::RunStatus::Completed)
    return "all " + std::to_string(m.rankCount()) + " ranks completed " +
           std::to_string(m.info.iterations) + " iterations";
  if (!m.info.statusReason.empty()) return m.info.statusReason;
  if (m.info.status == events::RunStatus::Running)
    return "the run file says the run is still running (or its launcher died)";
  return "";
}

// The data problems, each "  |  N ...; first: ...": partial file, corrupted messages, replica
// copies that differ, NaN/Inf.
std::string problemsSentence(const LoadedRun& run) {
  const auto& m = run.model;
  const RunProblems& pr = run.problems;
  std::string text;
  if (m.partial) text += "  |  PARTIAL: a rank shard is missing or the merge did not finish";
  if (pr.corruptMessages > 0) {
    const auto& t = m.transfers[pr.firstCorruptTransfer];
    text += "  |  " + std::to_string(pr.corruptMessages) +
            " messages arrived with another checksum/shape than sent; first: " + t.edge + " " +
            events::toString(t.direction) + " it" + std::to_string(t.iteration) + " mb" +
            std::to_string(t.microbatch) + " (rank " + std::to_string(t.srcRank) + " -> " +
            std::to_string(t.dstRank) + ")";
  }
  if (pr.replicaMismatches > 0)
    text += "  |  " + std::to_string(pr.replicaMismatches) +
            " replica copies differ from their first copy; first: " + pr.firstReplicaMismatch;
  if (pr.nonFiniteRecords > 0)
    text += "  |  " + std::to_string(pr.nonFiniteRecords) +
            " records hold NaN/Inf; first: " + describe(m, pr.firstNonFinite);
  return text;
}

// The banner's sentence.  With two runs open the comparison leads (its reason names the
// causally first divergence), then this run's own status; the data problems follow.
std::string bannerSentence(const LoadedRun& run, const analysis::Comparison* cmp) {
  std::string text = statusSentence(run);
  if (cmp)
    text = "compared with the other run: " + cmp->verdictReason +
           "  |  this run: " + statusWord(run.model.info.status) +
           (text.empty() ? "" : ", " + text);
  return text + problemsSentence(run);
}

// The badge's word: LIVE, the comparison's verdict with two runs open, else the status.
std::string badgeWord(const LoadedRun& run, const analysis::Comparison* cmp, bool completed,
                      bool nonFinite) {
  if (!run.live.empty()) return "LIVE";
  if (cmp) {
    std::string word = analysis::toString(cmp->verdict);
    for (char& ch : word) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return word;
  }
  if (nonFinite && completed) return "COMPLETED, NaN/Inf";
  return statusWord(run.model.info.status);
}

// The banner while the details load (or failed to): the recorded status, no verdict.
void drawPendingBanner(PanelContext& p, const ImVec2& pos, const ImVec2& size) {
  const auto& m = p.main.run->model;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 end(pos.x + size.x, pos.y + size.y);
  dl->AddRectFilled(pos, end, theme::kBannerBackground);
  // The status the run file records (not a verdict of ours), in a neutral colour.
  const char* word = p.main.run->live.empty() ? statusWord(m.info.status) : "LIVE";
  const ImVec2 ws = ImGui::CalcTextSize(word);
  const ImVec2 b0(pos.x + 8, pos.y + 5), b1(pos.x + 20 + ws.x, end.y - 5);
  p.probes.bannerColour = theme::kBadgeNeutral;
  dl->AddRectFilled(b0, b1, p.probes.bannerColour, 3);
  dl->AddText(ImVec2(b0.x + 6, pos.y + (size.y - ws.y) / 2), theme::kText, word);
  const std::string text = (p.main.run->live.empty() ? "" : liveNote(p.main.run->live) + "  |  ") +
                           detailsNote(p.main) +
                           "  |  the timeline, grid map and replay are ready; fates, stuck ranks, "
                           "NaN/Inf and corrupted messages follow once the whole run is in";
  p.probes.bannerText = text;
  p.probes.bannerShown = elideEnd(text, std::max(0.0f, end.x - 260 - (b1.x + 10)));
  dl->AddText(ImVec2(b1.x + 10, pos.y + (size.y - ImGui::GetTextLineHeight()) / 2), theme::kTextDim,
              p.probes.bannerShown.c_str());
  if (p.main.detailsPending()) {
    ImGui::SetCursorScreenPos(ImVec2(end.x - 250, pos.y + 7));
    ImGui::ProgressBar(p.main.progress(), ImVec2(240, size.y - 14));
  }
}

}  // namespace

void drawStatusBanner(PanelContext& p, const ImVec2& pos, const ImVec2& size) {
  const LoadedRun* run = p.main.run.get();
  if (!run) return;
  const auto& m = run->model;
  const RunProblems& pr = run->problems;
  // A live run (being written as it was read) is a snapshot, never completed.
  const bool completed =
      m.info.status == events::RunStatus::Completed && !m.partial && run->live.empty();
  const bool nonFinite = pr.nonFiniteRecords > 0 || pr.corruptMessages > 0 ||
                         pr.replicaMismatches > 0;  // a data problem
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 end(pos.x + size.x, pos.y + size.y);
  p.probes.banner = ImVec4(pos.x, pos.y, end.x, end.y);
  if (!run->detailsLoaded) {
    // No verdict before the whole model is in: the recorded status and what is loading.
    drawPendingBanner(p, pos, size);
    return;
  }
  // With two runs open the comparison's verdict leads: it is why two runs are open.
  const analysis::Comparison* cmp = p.nav.comparison();
  const bool cmpBad = cmp && (cmp->verdict == analysis::Verdict::Diverged ||
                              cmp->verdict == analysis::Verdict::Incomplete);
  const bool good = completed && !nonFinite && !cmpBad;
  dl->AddRectFilled(pos, end, good ? theme::kBannerGood : theme::kBannerBad);
  // The badge: green only for a completed run whose values are all finite (and, with two runs,
  // that the comparison found equal); a completed run with NaN/Inf or corrupted data is red.
  const ImU32 badge = good                                       ? theme::kGood
                      : m.info.status == events::RunStatus::Hung ? theme::fateColour(RankFate::Hung)
                                                                 : theme::kBad;
  p.probes.bannerColour = badge;
  const std::string wordText = badgeWord(*run, cmp, completed, nonFinite);
  const char* word = wordText.c_str();
  const ImVec2 ws = ImGui::CalcTextSize(word);
  const ImVec2 b0(pos.x + 8, pos.y + 5), b1(pos.x + 20 + ws.x, end.y - 5);
  dl->AddRectFilled(b0, b1, badge, 3);
  dl->AddText(ImVec2(b0.x + 6, pos.y + (size.y - ws.y) / 2), theme::textOn(badge), word);
  float x = b1.x + 10;

  // Buttons on the right: the problems, one click each, in causal order.
  std::vector<std::pair<std::string, int>> buttons;  // label, which
  if (pr.nonFiniteRecords > 0) buttons.emplace_back("First NaN/Inf", 0);
  if (pr.corruptMessages > 0) buttons.emplace_back("First corrupted message", 3);
  if (pr.firstStuckRank >= 0)
    buttons.emplace_back("Stuck: rank " + std::to_string(pr.firstStuckRank) + " (" +
                             toString(pr.ranks[pr.firstStuckRank].fate) + ")",
                         1);
  if (cmp && cmp->first && cmp->first->a >= 0) buttons.emplace_back("First divergence", 2);
  float buttonsW = 0;
  for (const auto& [label, which] : buttons)
    buttonsW += ImGui::CalcTextSize(label.c_str()).x + 2 * ImGui::GetStyle().FramePadding.x + 6;

  const std::string text = bannerSentence(*run, cmp);
  p.probes.bannerText = text;
  for (const auto& b : buttons) p.probes.bannerButtons.push_back(b.first);
  const float textW = end.x - x - buttonsW - 12;
  // Cut visibly ("..."), the whole sentence on hover.
  p.probes.bannerShown = elideEnd(text, std::max(0.0f, textW));
  dl->AddText(ImVec2(x, pos.y + (size.y - ImGui::GetTextLineHeight()) / 2),
              good ? theme::kText : theme::kBannerBadText, p.probes.bannerShown.c_str());
  ImGui::SetCursorScreenPos(ImVec2(x, pos.y));
  ImGui::InvisibleButton("##bannertext", ImVec2(std::max(1.0f, textW), size.y));
  if (ImGui::IsItemHovered() && !text.empty()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 50);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
  float bx = end.x - buttonsW - 4;
  for (const auto& [label, which] : buttons) {
    ImGui::SetCursorScreenPos(ImVec2(bx, pos.y + 3));
    ImGui::PushID(which);
    if (ImGui::Button(label.c_str())) {
      if (which == 0) p.nav.showNonFinite();
      if (which == 1) p.nav.showStuck();
      if (which == 2) p.nav.showDivergence();
      if (which == 3) {
        p.nav.select({Selection::Kind::Transfer, m.transfers[pr.firstCorruptTransfer].rank,
                      pr.firstCorruptTransfer},
                     false);
        p.nav.focusTransfer(pr.firstCorruptTransfer, false);
      }
    }
    ImGui::PopID();
    bx += ImGui::GetItemRectSize().x + 6;
  }
}

}  // namespace stagescope::ui
