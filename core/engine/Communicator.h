// Moves activations and gradients for one rank: pipeline P2P inside a module and bridges
// between modules (schedule.md §3, §4), recording every message on both sides.
//
// The plan drives the wire: each communication action of the rank's plan lists its messages
// (peer, c10d group, direction, microbatch, batch-axis split) in posting order and its
// boundary broadcasts; run() posts exactly those and nothing else, so the static progress
// check of the plan (plan::checkPlanProgress) covers what actually runs.  All sends and
// receives of an action are posted before any is waited for, so the combined ops (SF_RB /
// SB_RF) cannot deadlock; sends complete lazily (finishSends).  Bridge leaders concatenate
// their received parts in the plan's (DP) order and broadcast the result over their
// boundary TP group; bridge members receive that broadcast.
//
// Local hand-off: a message whose peer is this rank itself (a colocated encoder's last stage
// handing its output to the llm's first stage on the same rank, and the gradient back) does
// not touch the wire.  The send digests its payload, clones it into this rank's local mailbox
// (keyed by iteration, edge, direction, microbatch) and records an ordinary `send` row; the
// receive takes that clone, records the `recv` row (src_rank == dst_rank marks the hand-off)
// and verifies the sender's checksum like any receive.  The plan puts the send in an earlier
// action than the receive (PlanCheck proves it), so the mailbox never waits.
//
// Protocol per message, in the message's group under plan::messageTag: a frame starting
// with the shape header (int64[10]: ndim, dims..., dtype code, the sender's payload checksum
// and whether it is set) that also carries the payload, whose shape and dtype the receiver
// knows from the plan (plan::Message::shape/dtype); a payload that is not what the plan says
// follows as a second message (Communicator.cpp, "frames").  Before a payload is used the
// receiver verifies it: header and payload as planned, and at levels stats and full the
// sender's checksum (TransferCorrupt).
//
// Buffer ownership (the contract every c10d call of this class keeps):
//  - A posted send owns its bytes until it completes.  The caller's tensor is read only while
//    the send is posted (checksum, record, frame) and never handed to c10d: the frame is a
//    fresh buffer holding header and inline payload, and a payload that travels separately is
//    a private clone ("copy on post").  So the caller may modify or free what it passed the
//    moment run() returns, even though sends complete lazily.  This matters: at micro-batch
//    size 1 autograd lets a received activation's .grad share storage with a parameter's
//    .grad (cat + broadcast add), and the next microbatch's backward accumulates into it.
//  - A posted receive writes only into buffers this class allocated for it; they are handed
//    out (run()'s outputs) only after the receive completed.
//  - Boundary broadcasts run on fresh buffers (a concatenation on the leader, an allocation on
//    members) and are waited for before run() returns.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/engine/Faults.h"
#include "core/engine/ProcessGroups.h"
#include "core/events/Recorder.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"

namespace stagescope::engine {

// The explicit activation layout between stages: [seq, batch, hidden], batch on axis 1.
struct ActivationLayout {
  int batchAxis = 1;
};

// 2D <-> 3D adaptation for P2P (schedule.md §4.4): [a,b] -> [a,b,1]; a 3D [a,b,1] is
// ambiguous and rejected; everything else passes unchanged.
at::Tensor prepareForComm(const at::Tensor& t);
at::Tensor restoreFromComm(const at::Tensor& t);
// tensor_split semantics: n parts along `axis`, the first (N mod n) one element larger.
std::vector<at::Tensor> splitForPeers(const at::Tensor& t, int parts, int axis);

// What the executor is doing now, readable from a watchdog thread.
struct WaitState {
  std::atomic<int> iteration{-1};
  std::atomic<int> actionSeq{-1};
  std::atomic<int> waitingOn{-1};  // global rank, -1 when not waiting
  std::atomic<int> direction{0};
  std::atomic<int> microbatch{-1};
};

// A wait that ran past the configured timeout; `peer` is the rank waited on.  `wait()` says
// the same as the message, as data (the row the worker records in the `waits` table).
class CommTimeout : public std::runtime_error {
 public:
  CommTimeout(int rank, int peer, const std::string& message)
      : std::runtime_error(message), rank_(rank), peer_(peer) {
    wait_.rank = rank;
    wait_.peer = peer;
  }
  CommTimeout(events::WaitRecord wait, const std::string& message)
      : std::runtime_error(message), rank_(wait.rank), peer_(wait.peer), wait_(std::move(wait)) {}
  int rank() const { return rank_; }
  int peer() const { return peer_; }
  const events::WaitRecord& wait() const { return wait_; }

 private:
  int rank_, peer_;
  events::WaitRecord wait_;
};

// A received payload whose checksum differs from the one its sender put in the frame (in-band
// verification, levels stats and full).  The Communicator has already recorded the transfer
// and a "corrupt_transfer" diagnosis naming edge, direction, iteration, microbatch, both
// ranks and both checksums; what() is that sentence.
class TransferCorrupt : public std::runtime_error {
 public:
  TransferCorrupt(int rank, int sender, const std::string& message)
      : std::runtime_error(message), rank_(rank), sender_(sender) {}
  int rank() const { return rank_; }
  int sender() const { return sender_; }

 private:
  int rank_, sender_;
};

struct CommIds {  // identifies the action being executed, for records and errors
  int iteration = 0;
  int actionSeq = 0;
  const plan::Action* action = nullptr;
};

class Communicator {
 public:
  // `me` is this rank's plan (core/plan/Plan.h): run() posts exactly the messages and runs
  // exactly the boundary broadcasts of the action it is given.  The plan must outlive this.
  Communicator(const plan::RankPlan& me, ProcessGroups& groups, events::Recorder& recorder,
               at::Device device, WaitState* wait, const FaultInjector* faults = nullptr);

  ~Communicator();  // defined where Pending is complete

  // Creates every group this engine uses (module tp/pp/dp groups, bridge leader groups,
  // boundary broadcast groups) in one global order; call once on every rank.
  static void createAllGroups(const plan::RunConfig& config, const plan::Topology& topology,
                              ProcessGroups& groups);

  // Executes the communication action ids.action (one of this rank's plan).  `activation`:
  // this stage's output (SF, SF_RB); `gradients`: input gradients keyed by the module they
  // flow back to (SB, SB_RF).  Received activations land in `inputsOut` keyed by the module
  // they come from (upstream module for bridges, own module for P2P), a received output
  // gradient in `gradOut`.
  void run(const CommIds& ids, const at::Tensor* activation,
           const std::map<std::string, at::Tensor>* gradients,
           std::map<std::string, at::Tensor>* inputsOut, at::Tensor* gradOut);
  // Waits (with the timeout) for every send still in flight and records it; call at the end
  // of each iteration.
  void finishSends();
  // Posts the receives of communication action ids.action now, so that the peer's message can
  // land while this rank still computes the action before it; the next run() of that same
  // action (same iteration and sequence number) then waits on these instead of posting them.
  // Posting never blocks and each message has its own tag (plan::messageTag), so posting
  // early cannot pair a receive with another message; the recorded transfer still starts
  // when run() begins.  No-op for an action without receives.
  void prepostRecvs(const CommIds& ids);
  // The fault injector for the actions of `module` (a rank holding several stages has one per
  // stage); actions of other modules use the one given to the constructor.
  void useFaults(const std::string& module, const FaultInjector* faults);

 private:
  struct Pending;
  struct Exchange;
  std::shared_ptr<Group> groupOf(const plan::Message& m);  // the message's group; throws if none
  struct Parcel;                                           // a local hand-off in the mailbox
  const FaultInjector* faultsFor(const CommIds& ids) const;
  void handOff(Exchange& ex, const plan::Message& m, const std::shared_ptr<Group>& group,
               const at::Tensor& wire);
  void takeLocal(Exchange& ex, const plan::Message& m, const std::shared_ptr<Group>& group);
  void noteFault(const FaultInjector* faults, const events::TransferRecord& rec);
  at::Tensor sendPayload(Exchange& ex, const plan::Message& m, const at::Tensor* activation,
                         const std::map<std::string, at::Tensor>* gradients);
  void postSend(Exchange& ex, const plan::Message& m, const std::shared_ptr<Group>& group,
                const at::Tensor& wire);
  void postRecv(Exchange& ex, const plan::Message& m, const std::shared_ptr<Group>& group);
  void waitFor(const c10::intrusive_ptr<c10d::Work>& work, const Pending& p, const CommIds& ids);
  // The wait record of a timeout in action `ids` on `peer` (op/edge/direction set by caller).
  events::WaitRecord waitRecord(const CommIds& ids, int peer, const std::string& error) const;
  // "gave up after 3 s" or "stopped after 0.4 s, before its 3 s timeout" (Communicator.cpp).
  std::string waitedPhrase(std::chrono::steady_clock::time_point started) const;
  void completeRecvs(Exchange& ex, std::vector<Pending>& recvs);
  void verifyReceived(const Pending& p, const CommIds& ids);
  void completeSends(Exchange& ex);
  void reapSends(bool block);
  void deliver(Exchange& ex, std::map<std::string, at::Tensor>* inputsOut, at::Tensor* gradOut);
  at::Tensor toDevice(const at::Tensor& t) const;
  at::Tensor broadcastFromLeader(const plan::Broadcast& b, at::Tensor value, const CommIds& ids);

  const plan::RankPlan& me_;
  ProcessGroups& groups_;
  events::Recorder& recorder_;
  at::Device device_;
  at::Device wireDevice_{at::kCPU};  // where payloads live while in flight
  WaitState* wait_;
  const FaultInjector* faults_;
  ActivationLayout layout_;
  std::vector<Pending> inflight_;        // posted sends not yet known to be complete
  std::unique_ptr<Exchange> preposted_;  // receives of the next action (prepostRecvs)
  std::map<std::string, const FaultInjector*> faultsByModule_;
  // Local hand-offs posted and not yet taken: (iteration, edge, direction, microbatch).
  using ParcelKey = std::tuple<int, std::string, int, int>;
  std::map<ParcelKey, std::shared_ptr<Parcel>> mailbox_;
};

}  // namespace stagescope::engine
