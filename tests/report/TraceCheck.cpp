#include "TraceCheck.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

namespace stagescope::testing {
namespace {

// Trace times are microseconds with three decimals: compare in integer nanoseconds.
int64_t ns(const nlohmann::json& v) {
  return static_cast<int64_t>(v.get<double>() * 1000.0 + (v.get<double>() >= 0 ? 0.5 : -0.5));
}

struct Slice {
  int64_t start, end;
  std::string name;
};
using Track = std::pair<int64_t, int64_t>;  // (pid, tid)

std::string where(const Track& t) {
  return "pid " + std::to_string(t.first) + " tid " + std::to_string(t.second);
}

bool insideAny(const std::vector<Slice>& slices, int64_t t) {
  return std::any_of(slices.begin(), slices.end(),
                     [&](const Slice& s) { return s.start <= t && t <= s.end; });
}

}  // namespace

std::vector<std::string> traceProblems(const nlohmann::json& trace, TraceCounts* counts) {
  std::vector<std::string> out;
  std::map<Track, std::vector<Slice>> tracks;
  std::map<std::string, std::pair<int, int64_t>> asyncOpen;  // cat/id -> (begins, ts)
  struct FlowEnd {
    bool seen = false;
    Track track;
    int64_t ts = 0;
  };
  std::map<int64_t, std::pair<FlowEnd, FlowEnd>> flows;
  TraceCounts c;
  for (const auto& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" || ph == "i") continue;
    const Track track{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()};
    const int64_t ts = ns(e.at("ts"));
    if (ph == "X") {
      tracks[track].push_back({ts, ts + ns(e.at("dur")), e.at("name")});
      ++c.slices;
    } else if (ph == "b" || ph == "e") {
      const std::string key = e.at("cat").get<std::string>() + "/" + e.at("id").dump();
      auto& [open, began] = asyncOpen[key];
      if (ph == "b") {
        if (open != 0) out.push_back("async " + key + " begun twice");
        open = 1;
        began = ts;
        ++c.asyncSlices;
      } else {
        if (open != 1)
          out.push_back("async " + key + " ended without a begin");
        else if (ts < began)
          out.push_back("async " + key + " ends before it begins");
        open = 2;
      }
    } else if (ph == "s" || ph == "f") {
      auto& end = ph == "s" ? flows[e.at("id").get<int64_t>()].first
                            : flows[e.at("id").get<int64_t>()].second;
      if (end.seen) out.push_back("flow " + e.at("id").dump() + ": two '" + ph + "' events");
      end = {true, track, ts};
    }
  }
  for (const auto& [key, state] : asyncOpen)
    if (state.first != 2) out.push_back("async " + key + " never ended");
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return std::tie(a.start, b.end) < std::tie(b.start, a.end);  // parents before children
    });
    std::vector<const Slice*> stack;
    for (const auto& s : slices) {
      while (!stack.empty() && stack.back()->end <= s.start) stack.pop_back();
      if (!stack.empty() && s.end > stack.back()->end) {
        out.push_back(where(track) + ": slice '" + s.name + "' [" + std::to_string(s.start) + ", " +
                      std::to_string(s.end) + "] overlaps '" + stack.back()->name + "' [" +
                      std::to_string(stack.back()->start) + ", " +
                      std::to_string(stack.back()->end) + "] without nesting");
      }
      stack.push_back(&s);
    }
  }
  for (const auto& [id, ends] : flows) {
    const auto& [from, to] = ends;
    const std::string name = "flow " + std::to_string(id);
    if (!from.seen || !to.seen) {
      out.push_back(name + ": missing its " + (from.seen ? "finish" : "start"));
      continue;
    }
    ++c.flows;
    if (to.ts < from.ts)
      out.push_back(name + " ends at " + std::to_string(to.ts) + " ns, before its start at " +
                    std::to_string(from.ts) + " ns");
    if (!insideAny(tracks[from.track], from.ts))
      out.push_back(name + " starts outside every slice of " + where(from.track));
    if (!insideAny(tracks[to.track], to.ts))
      out.push_back(name + " ends outside every slice of " + where(to.track));
  }
  if (counts) *counts = c;
  return out;
}

}  // namespace stagescope::testing
