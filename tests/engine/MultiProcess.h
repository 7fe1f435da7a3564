// Multi-process test harness in c10d's own test style: the parent (the gtest process) forks one
// child per rank, then hosts a TCPStore on an ephemeral port (started after the forks, see
// runRanks) and waits for all children with a hard deadline (children still running then are
// killed; none is ever left behind).  Each
// child runs `body`, which returns a plain-text report; the parent gets every report back and
// makes its assertions there (children never run gtest assertions).
//
// Report format (Report below): one entry per line, "key token token ...".
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace stagescope::testing {

struct RankOutcome {
  int rank = -1;
  bool timedOut = false;  // killed at the deadline
  int exitCode = -1;      // 0 = the body returned; 1 = it threw; -1 = killed by a signal
  std::string report;     // what the body returned (or "ERROR <what>" when it threw)
};

// `body(rank, world, port)` runs in a forked child (at::set_num_threads(1) already applied);
// `port` is the parent's TCPStore port on 127.0.0.1.
// STAGESCOPE_TEST_DEADLINE_S overrides `deadline`; STAGESCOPE_TEST_GDB=1 appends the stacks
// of children still running at the deadline to their reports.
std::vector<RankOutcome> runRanks(int world, const std::function<std::string(int, int, int)>& body,
                                  std::chrono::seconds deadline = std::chrono::seconds(90));

// Builds and parses reports.
class Report {
 public:
  void put(const std::string& key, const std::vector<std::string>& tokens);
  void put(const std::string& key, const std::vector<double>& values);
  void put(const std::string& key, const std::vector<int64_t>& values);
  std::string text() const { return text_; }

  // Parsing: key -> tokens (a later line with the same key replaces an earlier one).
  static std::map<std::string, std::vector<std::string>> parse(const std::string& text);

 private:
  std::string text_;
};

std::vector<double> toDoubles(const std::vector<std::string>& tokens);
std::vector<int64_t> toInts(const std::vector<std::string>& tokens);

}  // namespace stagescope::testing
