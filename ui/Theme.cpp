// The viewer's palette and fonts (Theme.h).
#include "ui/Theme.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace stagescope::ui {
namespace theme {

ImFont* mono = nullptr;

void apply(ImGuiIO& io) {
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0;
  s.ChildRounding = 2;
  s.FrameRounding = 2;
  s.GrabRounding = 2;
  s.TabRounding = 2;
  s.PopupRounding = 2;
  s.ScrollbarRounding = 2;
  s.WindowBorderSize = 0;
  s.FrameBorderSize = 0;
  s.WindowPadding = ImVec2(8, 6);
  s.FramePadding = ImVec2(6, 3);
  s.ItemSpacing = ImVec2(6, 4);
  s.CellPadding = ImVec2(5, 2);
  s.ScrollbarSize = 12;
  ImVec4* c = s.Colors;
  auto rgb = [](int r, int g, int b, float a = 1.0f) {
    return ImVec4(r / 255.0f, g / 255.0f, b / 255.0f, a);
  };
  c[ImGuiCol_WindowBg] = rgb(28, 29, 33);
  c[ImGuiCol_ChildBg] = rgb(28, 29, 33);
  c[ImGuiCol_PopupBg] = rgb(34, 36, 41, 0.98f);
  c[ImGuiCol_MenuBarBg] = rgb(36, 38, 43);
  c[ImGuiCol_Border] = rgb(55, 58, 65);
  c[ImGuiCol_FrameBg] = rgb(42, 45, 51);
  c[ImGuiCol_FrameBgHovered] = rgb(52, 56, 64);
  c[ImGuiCol_FrameBgActive] = rgb(60, 65, 75);
  c[ImGuiCol_TitleBg] = rgb(36, 38, 43);
  c[ImGuiCol_TitleBgActive] = rgb(40, 43, 50);
  c[ImGuiCol_Header] = rgb(50, 72, 102);
  c[ImGuiCol_HeaderHovered] = rgb(62, 88, 125);
  c[ImGuiCol_HeaderActive] = rgb(70, 100, 140);
  c[ImGuiCol_Button] = rgb(48, 52, 60);
  c[ImGuiCol_ButtonHovered] = rgb(62, 88, 125);
  c[ImGuiCol_ButtonActive] = rgb(70, 100, 140);
  c[ImGuiCol_Tab] = rgb(36, 38, 43);
  c[ImGuiCol_TabHovered] = rgb(62, 88, 125);
  c[ImGuiCol_TabActive] = rgb(50, 72, 102);
  c[ImGuiCol_TableHeaderBg] = rgb(38, 41, 47);
  c[ImGuiCol_TableRowBgAlt] = rgb(33, 35, 40);
  c[ImGuiCol_SliderGrab] = rgb(255, 200, 60);
  c[ImGuiCol_SliderGrabActive] = rgb(255, 220, 110);
  c[ImGuiCol_CheckMark] = rgb(255, 200, 60);
  c[ImGuiCol_PlotLines] = rgb(110, 180, 255);
  c[ImGuiCol_PlotHistogram] = rgb(110, 180, 255);
  c[ImGuiCol_Separator] = rgb(55, 58, 65);

  const char* sans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  const char* monoPath = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";
  std::error_code ec;
  if (std::filesystem::exists(sans, ec))
    io.Fonts->AddFontFromFileTTF(sans, 15.0f);
  else
    io.Fonts->AddFontDefault();
  if (std::filesystem::exists(monoPath, ec))
    mono = io.Fonts->AddFontFromFileTTF(monoPath, 14.0f);
  else
    mono = io.Fonts->Fonts[0];
}

namespace {
ImVec4 hsv(float h, float s, float v, float a) {
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(h, s, v, r, g, b);
  return ImVec4(r, g, b, a);
}
const float kHues[] = {0.55f, 0.07f, 0.33f, 0.80f, 0.14f, 0.95f};
}  // namespace

ImU32 moduleColour(int moduleIndex, bool backward, float alpha) {
  float h = moduleIndex < 0 ? 0.6f : kHues[moduleIndex % 6];
  float sat = moduleIndex < 0 ? 0.1f : 0.62f;
  return ImGui::GetColorU32(backward ? hsv(h, sat + 0.1f, 0.56f, alpha)
                                     : hsv(h, sat, 0.86f, alpha));
}

ImU32 actionColour(int moduleIndex, int kind, float alpha) {
  using K = events::ActionKind;
  switch (static_cast<K>(kind)) {
    case K::Forward:
      return moduleColour(moduleIndex, false, alpha);
    case K::Backward:
      return moduleColour(moduleIndex, true, alpha);
    case K::SendForward:
    case K::SendBackward:
    case K::SendForwardRecvBackward:
    case K::SendBackwardRecvForward:
      return ImGui::GetColorU32(ImVec4(0.47f, 0.56f, 0.66f, alpha));
    case K::RecvForward:
    case K::RecvBackward:
      return ImGui::GetColorU32(ImVec4(0.33f, 0.37f, 0.44f, alpha));
    case K::DpReduce:
      return ImGui::GetColorU32(ImVec4(0.60f, 0.45f, 0.88f, alpha));
    case K::OptimizerStep:
      return ImGui::GetColorU32(ImVec4(0.82f, 0.74f, 0.36f, alpha));
    default:
      return ImGui::GetColorU32(ImVec4(0.5f, 0.5f, 0.5f, alpha));
  }
}

ImU32 fateColour(RankFate fate) {
  switch (fate) {
    case RankFate::Completed:
      return IM_COL32(40, 60, 46, 255);
    case RankFate::Hung:
      return IM_COL32(215, 130, 30, 255);
    case RankFate::Failed:
    case RankFate::Killed:
      return IM_COL32(200, 50, 50, 255);
    case RankFate::PeerLost:
      return IM_COL32(170, 90, 120, 255);
    case RankFate::Stopped:
    case RankFate::Unfinished:
      return IM_COL32(120, 110, 140, 255);
  }
  return kGrid;
}

ImU32 textOn(ImU32 bg) {
  float r = ((bg >> IM_COL32_R_SHIFT) & 0xff) / 255.0f;
  float g = ((bg >> IM_COL32_G_SHIFT) & 0xff) / 255.0f;
  float b = ((bg >> IM_COL32_B_SHIFT) & 0xff) / 255.0f;
  return 0.299f * r + 0.587f * g + 0.114f * b > 0.55f ? IM_COL32(20, 20, 24, 255)
                                                      : IM_COL32(240, 242, 246, 255);
}

ImU32 heatColour(float busy) {
  const float b = std::clamp(busy, 0.0f, 1.0f);
  // Idle: the row background with a red tint (a bubble); busy: bright blue-white.
  const auto mix = [b](int idle, int full) { return static_cast<int>(idle + (full - idle) * b); };
  return IM_COL32(mix(70, 150), mix(30, 200), mix(34, 255), 255);
}

}  // namespace theme

}  // namespace stagescope::ui
