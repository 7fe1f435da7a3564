#include "app/report/TraceEventWriter.h"

#include <cmath>

#include "app/report/Escape.h"

namespace stagescope::report {

TraceOut::TraceOut(const std::string& path) : file_(path) {
  buf_.reserve(1 << 20);
}

TraceOut& TraceOut::operator<<(std::string_view s) {
  buf_ += s;
  spill();
  return *this;
}

TraceOut& TraceOut::num(int64_t v) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof b, v);
  buf_.append(b, r.ptr);
  return *this;
}

TraceOut& TraceOut::us(int64_t ns) {
  const int64_t whole = ns / 1000, frac = ns % 1000;
  if (ns < 0 && ns > -1000) buf_ += '-';  // -0.x: the whole part alone would lose the sign
  num(whole);
  const auto f = static_cast<int>(frac < 0 ? -frac : frac);
  const char digits[4] = {'.', static_cast<char>('0' + f / 100),
                          static_cast<char>('0' + f / 10 % 10), static_cast<char>('0' + f % 10)};
  buf_.append(digits, 4);
  return *this;
}

TraceOut& TraceOut::real(double v) {
  if (!std::isfinite(v)) {
    buf_ += std::isnan(v) ? "\"NaN\"" : (v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return *this;
  }
  char b[40];  // as printf's %.9g (std::to_chars with a precision is defined so)
  const auto r = std::to_chars(b, b + sizeof b, v, std::chars_format::general, 9);
  buf_.append(b, r.ptr);
  return *this;
}

TraceOut& TraceOut::str(std::string_view s) {
  buf_ += '"';
  appendJsonEscaped(buf_, s);
  buf_ += '"';
  return *this;
}

void TraceOut::event() {
  if (!first_) buf_ += ",\n";
  first_ = false;
}

void TraceOut::close() {
  flush();
  file_.commit();
}

void TraceOut::spill() {
  if (buf_.size() > (1 << 20)) flush();
}

void TraceOut::flush() {
  file_.write(buf_.data(), buf_.size());
  buf_.clear();
}

void beginEvent(TraceOut& o, const TraceEvent& e) {
  o.event();
  o << "{\"ph\":\"" << e.ph << "\"";
  const std::string_view ph = e.ph;
  if (ph == "f") o << ",\"bp\":\"e\"";  // binds to the slice enclosing its time
  if (ph == "i") o << ",\"s\":\"g\"";   // a global instant
  if (e.cat) o << ",\"cat\":\"" << e.cat << "\"";
  o << ",\"name\":";
  o.str(e.name);
  if (e.id >= 0) {
    o << ",\"id\":";
    o.num(e.id);
  }
  o << ",\"pid\":";
  o.num(e.pid) << ",\"tid\":";
  o.num(e.tid);
  if (e.tsNs) {
    o << ",\"ts\":";
    o.us(*e.tsNs);
  }
  if (e.durNs) {
    o << ",\"dur\":";
    o.us(*e.durNs);
  }
}

}  // namespace stagescope::report
