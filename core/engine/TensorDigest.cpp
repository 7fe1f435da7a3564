#include "core/engine/TensorDigest.h"

#include <stdexcept>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/events/Checksum.h"

namespace stagescope::engine {
namespace {

at::Tensor hostContiguous(const at::Tensor& t) {
  at::Tensor h = t.device().is_cpu() ? t : t.to(at::kCPU);
  return h.contiguous();
}

// The checksum (events::checksumBytes) of the raw bytes, then one pass for the counts of NaN
// and Inf and min/max/mean/L2 over every element, as IEEE arithmetic (and torch's min/max)
// gives them: one NaN makes all four NaN; an Inf without NaN makes the L2 +Inf, min or max
// ±Inf and the mean ±Inf (NaN when both signs occur).  A non-finite tensor therefore never
// shows finite statistics (a tensor of 32 NaNs used to show L2 0, read everywhere as a norm
// of 0).  An empty tensor has min = max = mean = L2 = 0.
template <typename T>
void scan(const at::Tensor& h, TensorDigest* d) {
  const T* p = h.data_ptr<T>();
  const int64_t n = h.numel();
  double mn = std::numeric_limits<double>::infinity(), mx = -mn, sum = 0, sq = 0;
  int64_t nan = 0, inf = 0;
  d->checksum = events::checksumBytes(p, static_cast<size_t>(n) * sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(static_cast<float>(p[i]));
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    if (std::isinf(v)) ++inf;
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    sum += v;     // +Inf and -Inf together give NaN, as the mean should be
    sq += v * v;  // any Inf gives +Inf
  }
  d->stats.numel = n;
  d->stats.nanCount = nan;
  d->stats.infCount = inf;
  if (nan > 0) {
    const double q = std::numeric_limits<double>::quiet_NaN();
    d->stats.min = d->stats.max = d->stats.mean = d->stats.l2 = q;
    return;
  }
  d->stats.min = n ? mn : 0;
  d->stats.max = n ? mx : 0;
  d->stats.mean = n ? sum / static_cast<double>(n) : 0;
  d->stats.l2 = std::sqrt(sq);
}

}  // namespace

TensorDigest digest(const at::Tensor& t) {
  TensorDigest d;
  at::Tensor h = hostContiguous(t.detach());
  switch (h.scalar_type()) {
    case at::kFloat:
      scan<float>(h, &d);
      break;
    case at::kDouble:
      scan<double>(h, &d);
      break;
    case at::kBFloat16:
      scan<at::BFloat16>(h, &d);
      break;
    case at::kHalf:
      scan<at::Half>(h, &d);
      break;
    case at::kLong:
      scan<int64_t>(h, &d);
      break;
    case at::kInt:
      scan<int32_t>(h, &d);
      break;
    case at::kShort:
      scan<int16_t>(h, &d);
      break;
    case at::kByte:
      scan<uint8_t>(h, &d);
      break;
    case at::kChar:
      scan<int8_t>(h, &d);
      break;
    case at::kBool:
      scan<bool>(h, &d);
      break;
    default:
      scan<float>(h.to(at::kFloat), &d);
      break;
  }
  return d;
}

std::vector<uint8_t> hostBytes(const at::Tensor& t) {
  at::Tensor h = hostContiguous(t.detach());
  std::vector<uint8_t> out(h.nbytes());
  if (!out.empty()) std::memcpy(out.data(), h.data_ptr(), out.size());
  return out;
}

at::ScalarType scalarTypeOf(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float64") return at::kDouble;
  if (name == "float16") return at::kHalf;
  throw std::invalid_argument("dtype \"" + name + "\": expected float32 or bfloat16");
}

at::ScalarType scalarTypeOf(events::Dtype dtype) {
  switch (dtype) {
    case events::Dtype::Float32:
      return at::kFloat;
    case events::Dtype::BFloat16:
      return at::kBFloat16;
    case events::Dtype::Float64:
      return at::kDouble;
  }
  return at::kFloat;
}

std::string dtypeName(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kByte:
      return "uint8";
    case at::kChar:
      return "int8";
    case at::kBool:
      return "bool";
    default:
      return std::string(c10::toString(t.scalar_type()));
  }
}

std::vector<int64_t> shapeOf(const at::Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
}

}  // namespace stagescope::engine
