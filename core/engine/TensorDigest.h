// Checksum and statistics of a tensor in one pass over its bytes: what the recorder stores
// for every transfer and gradient.  The checksum is events::checksumBytes (XXH3-64) over the
// raw contiguous bytes (so sender and receiver agree bit for bit); statistics accumulate in
// float64.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::engine {

struct TensorDigest {
  uint64_t checksum = 0;
  events::TensorStats stats;
};

// `t` may live on any device; it is copied to the host (contiguous) first when needed.
TensorDigest digest(const at::Tensor& t);
// Raw contiguous host bytes of `t` (for level full).
std::vector<uint8_t> hostBytes(const at::Tensor& t);
std::string dtypeName(const at::Tensor& t);
// The dtype a plan's message names ("float32" | "bfloat16", as dtypeName writes them).
at::ScalarType scalarTypeOf(const std::string& dtypeName);
// The dtype a run computes in.
at::ScalarType scalarTypeOf(events::Dtype dtype);
std::vector<int64_t> shapeOf(const at::Tensor& t);

}  // namespace stagescope::engine
