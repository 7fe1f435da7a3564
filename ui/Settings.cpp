// View settings that outlive a session: a small key=value file next to imgui.ini under
// $XDG_CONFIG_HOME/stagescope (or ~/.config/stagescope).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ui/App.h"

namespace stagescope::ui {

std::string configDir() {
  namespace fs = std::filesystem;
  fs::path base(".");
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    base = fs::path(xdg);
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = fs::path(home) / ".config";
  return (base / "stagescope").string();
}

void App::loadSettings() {
  std::ifstream in(std::filesystem::path(configDir()) / "viewer.ini");
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    try {
      if (k == "recent") {
        if (view_.recent.size() < 10) view_.recent.push_back(v);
      } else if (k == "row_height")
        view_.rowHeight = std::clamp(std::stof(v), 14.0f, 60.0f);
      else if (k == "arrows")
        view_.showArrows = v == "1";
      else if (k == "plan")
        view_.showPlan = v == "1";
      else if (k == "idle")
        view_.showIdle = v == "1";
      else if (k == "speed")
        view_.speed = std::clamp(std::stof(v), 1.0f, 5000.0f);
      else if (k == "inspector_width")
        view_.inspectorWidth = std::clamp(std::stof(v), 250.0f, 900.0f);
      else if (k == "bottom_height")
        view_.bottomHeight = std::clamp(std::stof(v), 120.0f, 900.0f);
      else if (k == "tab")
        view_.tab = static_cast<BottomTab>(std::clamp(std::stoi(v), 0, 4));
    } catch (const std::exception&) {
      // A damaged settings file only loses that setting.
    }
  }
}

void App::saveSettings() const {
  std::error_code ec;
  std::filesystem::create_directories(configDir(), ec);
  std::ofstream out(std::filesystem::path(configDir()) / "viewer.ini");
  if (!out) return;
  out << "row_height=" << view_.rowHeight << "\n";
  out << "arrows=" << (view_.showArrows ? 1 : 0) << "\n";
  out << "plan=" << (view_.showPlan ? 1 : 0) << "\n";
  out << "idle=" << (view_.showIdle ? 1 : 0) << "\n";
  out << "speed=" << view_.speed << "\n";
  out << "inspector_width=" << view_.inspectorWidth << "\n";
  out << "bottom_height=" << view_.bottomHeight << "\n";
  out << "tab=" << static_cast<int>(view_.tab) << "\n";
  for (const auto& r : view_.recent) out << "recent=" << r << "\n";
}

void App::addRecent(const std::string& path) {
  auto& r = view_.recent;
  r.erase(std::remove(r.begin(), r.end(), path), r.end());
  r.insert(r.begin(), path);
  if (r.size() > 10) r.resize(10);
}

}  // namespace stagescope::ui
