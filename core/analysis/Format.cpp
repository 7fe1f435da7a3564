#include "core/analysis/Format.h"

#include <cmath>
#include <cstdio>

namespace stagescope::analysis {

std::string formatChecksum(uint64_t checksum) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

std::string formatShape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string formatValue(double v, int digits) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string diagnosisWhere(const events::DiagnosisRecord& d) {
  std::string where = "[" + d.kindName() + "]";
  auto add = [&](int value, const char* label) {
    if (value < 0) return;
    where += (where.back() == ']' ? " " : ", ") + std::string(label) + std::to_string(value);
  };
  add(d.rank, "rank ");
  add(d.iteration, "iteration ");
  add(d.actionSeq, "action #");
  add(d.waitsOnRank, "waits on rank ");
  return where;
}

}  // namespace stagescope::analysis
