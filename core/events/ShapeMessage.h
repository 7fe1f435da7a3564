// Shape messages: a job that sends a tensor's shape before the tensor itself on the same
// channel (Megatron-Core does, with variable sequence lengths and on its bridges: an int64
// tensor of ndim elements, then the payload). Capture records such a preamble as the shape
// message of the payload that follows (same iteration and microbatch) on the edge named
// `<edge>#shape`, so that the k-th message of a channel stays the k-th payload; the wait-for
// graph then says "the shape of the activation of microbatch 2".
#pragma once

#include <string>
#include <string_view>

namespace stagescope::events {

inline constexpr std::string_view kShapeEdgeSuffix = "#shape";

// The edge of the shape messages of `edge`'s payloads.
inline std::string shapeEdgeOf(const std::string& edge) {
  return edge + std::string(kShapeEdgeSuffix);
}

// Whether `edge` carries shape messages (shapeEdgeOf).
inline bool isShapeEdge(std::string_view edge) {
  return edge.size() > kShapeEdgeSuffix.size() &&
         edge.substr(edge.size() - kShapeEdgeSuffix.size()) == kShapeEdgeSuffix;
}

}  // namespace stagescope::events
