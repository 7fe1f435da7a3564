#include "core/events/CapturedLayout.h"

#include <sstream>

namespace stagescope::events {

std::vector<JobStage> parseJobSchedule(const std::string& configText) {
  std::vector<JobStage> out;
  std::istringstream in(configText);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kJobScheduleLine, 0) != 0) continue;
    std::istringstream fields(line.substr(kJobScheduleLine.size()));
    JobStage j;
    std::string kv;
    while (fields >> kv) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = kv.substr(0, eq), value = kv.substr(eq + 1);
      try {
        if (k == "module")
          j.module = value;
        else if (k == "rank")
          j.rank = std::stoi(value);
        else if (k == "stage")
          j.stage = std::stoi(value);
        else if (k == "global_stage")
          j.globalStage = std::stoi(value);
        else if (k == "total_stages")
          j.totalStages = std::stoi(value);
        else if (k == "warmup")
          j.warmup = std::stoi(value);
      } catch (const std::exception&) {
        j.rank = -1;  // a malformed number: the line is skipped
        break;
      }
    }
    if (j.rank >= 0 && !j.module.empty() && j.warmup >= 0) out.push_back(j);
  }
  return out;
}

}  // namespace stagescope::events
