#include "app/report/ReportFormat.h"

#include <cmath>
#include <cstdio>

namespace stagescope::report {

std::string NumberFormat::operator()(double v, const char* printfFormat) const {
  if (std::isnan(v)) return missing_;
  char buf[64];
  std::snprintf(buf, sizeof buf, printfFormat, v);
  return buf;
}

std::string NumberFormat::percent(double fraction) const {
  return (*this)(100.0 * fraction, "%.1f%%");
}

std::string NumberFormat::difference(double v) const {
  return (*this)(v, "%.3g");
}

std::string NumberFormat::milliseconds(double ms) const {
  return (*this)(ms, "%.3f ms");
}

}  // namespace stagescope::report
