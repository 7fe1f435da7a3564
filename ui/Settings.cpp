// View settings that outlive a session: a small key=value file next to imgui.ini under
// $XDG_CONFIG_HOME/stagescope (or ~/.config/stagescope).
#include "ui/Settings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <unistd.h>

#include "core/events/Printable.h"
#include "ui/Settings.h"

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

std::string settingsFileProblem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || st.type() == fs::file_type::not_found) return "";
  if (st.type() == fs::file_type::symlink) return "is a symbolic link";
  if (st.type() != fs::file_type::regular) return "is not a regular file";
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxSettingsBytes)
    return "holds " + std::to_string(size) + " bytes, more than a settings file (" +
           std::to_string(kMaxSettingsBytes) + ")";
  return "";
}

namespace {

// A setting's number: the whole text a finite number within [lo, hi].
std::optional<double> settingNumber(const std::string& text, double lo, double hi) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || at != end || !std::isfinite(v) || v < lo || v > hi)
    return std::nullopt;
  return v;
}

}  // namespace

// Each line "key=value".  A value that is not what the key takes (a number out of range or
// not a number, a flag other than 0/1) keeps that setting's default and prints one line
// naming the file, key, value and what was expected; unknown keys are ignored (a newer
// viewer may have written them).
void ViewerSettings::load(ViewerState& view) {
  const std::string file = (std::filesystem::path(configDir()) / "viewer.ini").string();
  if (const std::string problem = settingsFileProblem(file); !problem.empty()) {
    std::fprintf(stderr, "%s\n",
                 events::printableLine("viewer: " + file + ": " + problem +
                                       "; the default settings are used and not saved")
                     .c_str());
    unsaved_ = true;
    return;
  }
  std::ifstream in(file);
  std::string line;
  auto bad = [&](const std::string& k, const std::string& v, const std::string& expected) {
    std::fprintf(stderr, "%s\n",
                 events::printableLine("viewer: " + file + ": " + k + " = '" + v.substr(0, 64) +
                                       "': expected " + expected + "; the default is used")
                     .c_str());
  };
  auto number = [&](const std::string& k, const std::string& v, double lo, double hi, float* out) {
    if (auto n = settingNumber(v, lo, hi)) {
      *out = static_cast<float>(*n);
    } else {
      char range[96];
      std::snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
      bad(k, v, range);
    }
  };
  auto flag = [&](const std::string& k, const std::string& v, bool* out) {
    if (v == "0" || v == "1")
      *out = v == "1";
    else
      bad(k, v, "0 or 1");
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "recent") {
      if (view.recent.size() < 10) view.recent.push_back(v);
    } else if (k == "row_height") {
      number(k, v, 14, 60, &view.rowHeight);
    } else if (k == "arrows") {
      flag(k, v, &view.showArrows);
    } else if (k == "plan") {
      flag(k, v, &view.showPlan);
    } else if (k == "idle") {
      flag(k, v, &view.showIdle);
    } else if (k == "speed") {
      number(k, v, 1, 5000, &view.speed);
    } else if (k == "inspector_width") {
      number(k, v, 250, 900, &view.inspectorWidth);
    } else if (k == "bottom_height") {
      number(k, v, 120, 900, &view.bottomHeight);
    } else if (k == "tab") {
      const auto n = settingNumber(v, 0, 4);
      if (n && *n == std::floor(*n))
        view.tab = static_cast<BottomTab>(static_cast<int>(*n));
      else
        bad(k, v, "a whole number from 0 to 4");
    }
  }
}

// Written to a temporary file beside viewer.ini and renamed over it, so a full disk or a
// crash mid-write leaves the previous settings whole (the viewer's own file; nothing else is
// touched). A failed save is silent: settings are a convenience, never worth an error.
void ViewerSettings::save(const ViewerState& view) const {
  namespace fs = std::filesystem;
  if (unsaved_) return;  // viewer.ini is not the viewer's to replace (loadSettings)
  std::error_code ec;
  fs::create_directories(configDir(), ec);
  const fs::path path = fs::path(configDir()) / "viewer.ini";
  const fs::path tmp = fs::path(configDir()) / (".viewer.ini.tmp-" + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    out << "row_height=" << view.rowHeight << "\n";
    out << "arrows=" << (view.showArrows ? 1 : 0) << "\n";
    out << "plan=" << (view.showPlan ? 1 : 0) << "\n";
    out << "idle=" << (view.showIdle ? 1 : 0) << "\n";
    out << "speed=" << view.speed << "\n";
    out << "inspector_width=" << view.inspectorWidth << "\n";
    out << "bottom_height=" << view.bottomHeight << "\n";
    out << "tab=" << static_cast<int>(view.tab) << "\n";
    for (const auto& r : view.recent) out << "recent=" << r << "\n";
    out.close();
    if (!out) {
      fs::remove(tmp, ec);  // the temporary file this call created
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

void addRecent(std::vector<std::string>& r, const std::string& path) {
  r.erase(std::remove(r.begin(), r.end(), path), r.end());
  r.insert(r.begin(), path);
  if (r.size() > 10) r.resize(10);
}

}  // namespace stagescope::ui
