// The Run info tab (RunInfo.h).
#include "ui/RunInfo.h"

#include "core/analysis/Format.h"
#include "imgui.h"

namespace stagescope::ui {

void drawRunInfo(PanelContext& p) {
  const LoadedRun* run = p.main.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  const auto& m = run->model;
  const auto& info = m.info;
  ImGui::Columns(2, "##info", true);
  ImGui::Text("run %s   schema %d", info.runId.c_str(), m.schemaVersion);
  ImGui::TextWrapped("status %s  %s", events::toString(info.status), info.statusReason.c_str());
  if (!run->live.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", run->live.c_str());
  ImGui::Text("stagescope %s  torch %s  sqlite %s", info.versionStagescope.c_str(),
              info.versionTorch.c_str(), info.versionSqlite.c_str());
  ImGui::Text("config hash %s", info.configHash.c_str());
  if (m.partial) ImGui::TextColored(ImVec4(1, 0.5f, 0.3f, 1), "partial run");
  for (const auto& n : m.notes) ImGui::BulletText("%s", n.c_str());
  if (!m.diagnoses.empty()) {
    ImGui::TextColored(ImVec4(1, 0.5f, 0.3f, 1), "Diagnoses");
    for (const auto& d : m.diagnoses) {
      const std::string where = analysis::diagnosisWhere(d);
      ImGui::Bullet();
      ImGui::TextWrapped("%s: %s", where.c_str(), d.message.c_str());
    }
  }
  ImGui::NextColumn();
  ImGui::TextDisabled("config");
  ImGui::TextUnformatted(info.configText.empty() ? "(not recorded)" : info.configText.c_str());
  ImGui::Columns(1);
}

}  // namespace stagescope::ui
