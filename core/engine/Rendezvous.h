// Rendezvous checks over the job's store, run once per rank after it connects and before any
// process group is built.  Every wait here is bounded by the run's timeout and ends in one
// line naming the ranks involved.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

#include "core/engine/RunIdentity.h"

namespace stagescope::engine {

// A rendezvous that cannot go on: ranks disagree on the run (kind Mismatch), a rank did not
// arrive in time (kind Timeout), or a rank advertises an address its peers cannot reach (kind
// Network, e.g. loopback while peers are on other hosts).  what() is the one-line diagnosis.
class RendezvousError : public std::runtime_error {
 public:
  enum class Kind { Mismatch, Timeout, Network };
  RendezvousError(Kind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// Every rank publishes its identity under "stagescope/identity/<rank>".  Rank 0 waits for all
// of them (at most `timeout`), compares them (identityMismatch) and publishes one verdict
// under "stagescope/identity/verdict"; every rank waits for the verdict (at most `timeout`
// more) and throws RendezvousError when it is not "ok".  After the identities agree, rank 0
// also checks the advertised Gloo addresses (addressProblem).  So a mismatch stops every rank with
// the same line, and no rank proceeds to build groups with a peer that runs another config.
void verifyRunIdentity(c10d::Store& store, int rank, int worldSize, const RunIdentity& mine,
                       std::chrono::milliseconds timeout);

// This rank's CLOCK_MONOTONIC (engine::nowNs, the clock every record uses) relative to rank
// 0's, estimated NTP-style through the store: `rounds` round trips (this rank stamps t1, asks;
// rank 0 answers with its time T; this rank stamps t2).  Each gives offset (t1+t2)/2 - T with
// error at most (t2-t1)/2; the sample with the smallest round trip is kept.
struct ClockEstimate {
  int64_t offsetNs = 0;       // this rank's clock minus rank 0's; 0 when not significant
  int64_t uncertaintyNs = 0;  // half the smallest round trip: |true - measured| <= this
  int64_t measuredNs = 0;     // the min-RTT estimate before the significance rule
  int64_t elapsedNs = 0;      // how long the estimate took on this rank
};
// Collective: every rank calls it with the same `phase` ("start", "end"); rank 0 serves the
// others one by one and returns {0, 0, 0}.  An offset within its uncertainty is reported as 0
// (one host: the clocks are the same clock).  Each wait is bounded by `timeout`; throws
// RendezvousError (Timeout) naming the rank that did not answer.
ClockEstimate estimateClockOffset(c10d::Store& store, int rank, int worldSize,
                                  const std::string& phase, std::chrono::milliseconds timeout,
                                  int rounds = 8);

}  // namespace stagescope::engine
