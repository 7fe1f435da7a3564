// Numbers in the comparison reports (Markdown, HTML): one home for how a value, a percentage
// and a duration read, so that both writers say the same thing the same way.
//
// A NaN stands for a value that was not recorded (or a ratio with nothing to compare): it is
// written as the format's `missing` text, never as "nan".  Everything else goes through one
// printf conversion of a double, so "%.3g" here is "%.3g" in both reports.
#pragma once

#include <string>

namespace stagescope::report {

class NumberFormat {
 public:
  // `missing`: what a NaN reads as in this report ("-" in Markdown, "&ndash;" in HTML).
  explicit constexpr NumberFormat(const char* missing) : missing_(missing) {}

  // `v` through `printfFormat`, a printf format with one double conversion (at most 63 bytes
  // of output).  The default, six significant digits, is a plain value in a tooltip.
  std::string operator()(double v, const char* printfFormat = "%.6g") const;
  // A fraction in [0, 1] (a bubble) as a percentage with one decimal: 0.253 -> "25.3%".
  std::string percent(double fraction) const;
  // A difference, relative or absolute, with three significant digits: "0.000123", "1.5e-09"
  // (a difference is read for its size, not its digits).
  std::string difference(double v) const;
  // A duration in milliseconds, three decimals and the unit: "12.345 ms".
  std::string milliseconds(double ms) const;

 private:
  const char* missing_;
};

inline constexpr NumberFormat kMarkdownNumbers{"-"};
inline constexpr NumberFormat kHtmlNumbers{"&ndash;"};

}  // namespace stagescope::report
