// Where the timeline and the loading overview draw a full-height line at an iteration's start.
// ImGui-free.
//
// A line per iteration helps while iterations are wide enough to tell apart.  Once the
// iterations in view are on average closer than kMinIterationLineGapPx pixels, every pixel
// column of the rows gets a line or two, which washes the rows' busy shading (the bubbles,
// the structure the zoomed-out view is for) into one grey haze and, under a software
// renderer, costs most of a frame (1,860 iterations of a 10^7-event run: 75 of 113 ms of CPU).
// Then no line is drawn across the rows; the ruler still marks and labels the iterations, and
// zooming in brings the lines back.
#pragma once

#include <cstddef>

namespace stagescope::ui {

constexpr float kMinIterationLineGapPx = 4.0f;

// Whether `iterationsInView` iteration starts spread over `widthPx` pixels get their lines.
bool drawsIterationLines(size_t iterationsInView, float widthPx);

}  // namespace stagescope::ui
