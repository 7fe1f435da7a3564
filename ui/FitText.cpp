#include "ui/FitText.h"

#include "imgui.h"

namespace stagescope::ui {
namespace {

float widthOf(const std::string& s) {
  return ImGui::CalcTextSize(s.c_str()).x;
}

}  // namespace

std::string elideEnd(const std::string& text, float width) {
  if (widthOf(text) <= width) return text;
  // Binary search on the prefix length: CalcTextSize is linear, the banner's text is long.
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (widthOf(text.substr(0, mid) + "...") <= width)
      lo = mid;
    else
      hi = mid - 1;
  }
  return text.substr(0, lo) + "...";
}

std::string elideMiddle(const std::string& text, float width) {
  if (widthOf(text) <= width) return text;
  // Keep as many characters as fit, split evenly between the two ends.
  size_t lo = 0, hi = text.size();
  auto cut = [&](size_t keep) {
    const size_t tail = keep / 2, head = keep - tail;
    return text.substr(0, head) + "..." + text.substr(text.size() - tail);
  };
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (widthOf(cut(mid)) <= width)
      lo = mid;
    else
      hi = mid - 1;
  }
  return cut(lo);
}

}  // namespace stagescope::ui
