// The Chrome trace-event JSON writer behind `stagescope export` (ChromeTrace.h): a buffered
// file writer (millions of events: no JSON DOM) and the one function every kind of event is
// written by, so that every event has the same keys in the same order:
//   {"ph":..,["bp":"e" | "s":"g"],["cat":..],"name":..,["id":..],"pid":..,"tid":..,
//    ["ts":..],["dur":..],["args":{..}]}
// Times are written in microseconds with nanosecond precision ("12.005").
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/TextFile.h"

namespace stagescope::report {

// A buffered writer of one trace file; the file replaces `path` only at close(), complete
// (AtomicFile).  Throws std::runtime_error naming the path when it cannot be written.
class TraceOut {
 public:
  explicit TraceOut(const std::string& path);
  TraceOut& operator<<(std::string_view s);  // raw JSON text
  TraceOut& num(int64_t v);
  template <typename Ints>
  TraceOut& nums(const Ints& vs) {  // a JSON array of integers
    buf_ += '[';
    for (size_t k = 0; k < vs.size(); ++k) {
      if (k) buf_ += ',';
      num(vs[k]);
    }
    buf_ += ']';
    return *this;
  }
  TraceOut& us(int64_t ns);           // ns as microseconds with ns precision: "-0.250", "12.005"
  TraceOut& real(double v);           // %.9g; a non-finite value as the string "NaN"/"Infinity"
  TraceOut& str(std::string_view s);  // a JSON string, escaped (always valid UTF-8)
  void event();                       // the separator before each event but the first
  void close();

 private:
  void spill();
  void flush();
  AtomicFile file_;
  std::string buf_;
  bool first_ = true;
};

// One event's common keys.  Which optional keys appear follows the phase: "f" (a flow's end)
// binds to the enclosing slice ("bp":"e"), "i" is global ("s":"g").
struct TraceEvent {
  const char* ph;             // "M", "X", "b", "e", "s", "f" or "i"
  const char* cat = nullptr;  // the category (plain ASCII, written as is); none on metadata
  std::string_view name;
  int64_t id = -1;  // async slices and flows; < 0: no id
  int64_t pid = 0, tid = 0;
  std::optional<int64_t> tsNs = std::nullopt;   // from the trace's start; metadata has none
  std::optional<int64_t> durNs = std::nullopt;  // complete ("X") slices
};

// Writes the event up to its args (TraceEvent's keys); the caller closes it.
void beginEvent(TraceOut& o, const TraceEvent& e);

// An event without args.
inline void writeEvent(TraceOut& o, const TraceEvent& e) {
  beginEvent(o, e);
  o << "}";
}

// An event with args: `writeArgs(o)` writes the members of the args object ("k":v,...).
template <typename WriteArgs>
void writeEvent(TraceOut& o, const TraceEvent& e, WriteArgs&& writeArgs) {
  beginEvent(o, e);
  o << ",\"args\":{";
  writeArgs(o);
  o << "}}";
}

}  // namespace stagescope::report
