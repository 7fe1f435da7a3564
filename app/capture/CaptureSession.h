// CaptureSession: the recording state of one process of a captured PyTorch job.
//
// A captured job is a user's own torch.distributed program whose process groups use the
// `stagescope` backend (app/capture/RecordingBackend).  Every group of a process shares this
// one session: one shard writer (storage/ShardWriter, the same run-file format as
// stagescope's own runs), the current iteration (set by the job's `step(i)`), the per-rank
// operation sequence and the per-channel message counters that give captured messages their
// logical identity without a plan.
//
// Logical identity of a captured point-to-point message (docs/capture.md):
//   channel   = (group, src global rank, dst global rank, tag)
//   iteration = the step() value current when the op was posted (0 when step() is never called)
//   index     = k for the k-th message posted on that channel in that iteration; stored as the
//               transfer's `microbatch`, so the run file's pairing key pairs the k-th send with
//               the k-th receive per channel, in the order the wire matches them.
//
// Thread safety: every method may be called from any thread (the job's thread posts ops,
// waits may happen elsewhere); counters are under one mutex, recording is ShardWriter's
// enqueue (also thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "app/capture/HangWatchdog.h"
#include "core/events/Recorder.h"

namespace stagescope::storage {
class ShardWriter;
}

namespace stagescope::capture {

struct CaptureConfig {
  std::string runPath;  // the run file; rank N writes <runPath>.rank<N>.shard
  events::RecordLevel level = events::RecordLevel::Stats;
  std::string runId;  // default: runIdFromEnvironment(), else the run file's name
  // How long an operation may stay incomplete before the hang watchdog records what the rank
  // waits on; 0: each group's own timeout (init_process_group(timeout=...)).
  std::chrono::milliseconds hangTimeout{0};
};

// The run id every rank of one job agrees on: STAGESCOPE_RUN_ID, else torchrun's
// TORCHELASTIC_RUN_ID, else "" (then the run file's name is used).
std::string runIdFromEnvironment();

// Parses a hang timeout in seconds (> 0, finite) named `what` in the error.
std::chrono::milliseconds parseHangTimeout(const std::string& text, const std::string& what);

// Reads STAGESCOPE_RUN (run file), STAGESCOPE_LEVEL (off|meta|stats|full, default stats) and
// STAGESCOPE_HANG_TIMEOUT (seconds > 0).  `ok` is false when STAGESCOPE_RUN is unset; throws
// std::invalid_argument naming the variable, its value and the accepted values when
// STAGESCOPE_LEVEL or STAGESCOPE_HANG_TIMEOUT is not valid.
CaptureConfig configFromEnvironment(bool* ok);

class CaptureSession {
 public:
  static CaptureSession& instance();

  // Sets where and how to record.  Allowed until the session started; afterwards throws
  // std::logic_error (a process records into one shard).
  void configure(CaptureConfig cfg);
  bool configured() const;

  // Called by the first backend of the process (the default group: group rank == global
  // rank).  Opens the shard and writes the rank's row (rank 0 also the run row, status
  // running).  Without configure(), the environment is read; with neither, throws
  // std::runtime_error saying how to configure.  Later calls check the rank and return.
  void start(int globalRank, int worldSize);
  bool started() const;
  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  events::RecordLevel level() const;
  bool recording() const { return level() > events::RecordLevel::Off; }
  events::Recorder& recorder();  // NullRecorder until started

  // Iteration boundary: ops posted from now on belong to `iteration` (>= 0); the per-rank
  // sequence and the channel counters restart.
  void step(int iteration);
  int iteration() const;

  struct OpIds {
    int iteration = 0;
    int seq = 0;    // index of the op among this rank's ops of the iteration
    int index = 0;  // k-th op on its channel (p2p) or group (collective) in the iteration
  };
  // Assigns the identity of a p2p message on (group, src, dst, tag).
  OpIds nextMessage(const std::string& group, int src, int dst, int tag);
  // The identity of a shape message on (group, src, dst, tag): the index of the payload that
  // follows it (the channel's count is not advanced; events/ShapeMessage.h).
  OpIds nextShapeMessage(const std::string& group, int src, int dst, int tag);
  // Assigns the identity of a collective on `group`.
  OpIds nextCollective(const std::string& group);
  // Whether a small 1-D int64 message on a P2P channel is a shape preamble
  // (stagescope_torch.shape_preambles; off by default: a job's own small int64 payloads stay
  // payloads).
  void setShapePreambles(bool on);
  bool shapePreambles() const;
  // One torch.distributed.batch_isend_irecv call (stagescope_torch wraps it): the point-to-point
  // ops posted between beginBatch() and endBatch() get a p2p_batches row with this process's
  // batch number (0, 1, ... per rank); currentBatch() is -1 outside a call.
  void beginBatch();
  void endBatch();
  int currentBatch() const;

  // Message roles (events/MessageRole.h): the capture helpers announce what the tensor at
  // `dataPtr` means before the call that posts it (stagescope_torch.megatron.record_roles);
  // the backend asks roleOf() when it posts a message; clearRoles() once the call returned.
  struct ExpectedRole {
    events::Direction carries = events::Direction::Activation;
    bool peerIsNext = false;
    std::string call;
  };
  void expectRole(const void* dataPtr, ExpectedRole role);
  void clearRoles();
  std::optional<ExpectedRole> roleOf(const void* dataPtr) const;

  // The job's layout as a stagescope config (docs/capture.md "Declaring the layout"): kept in
  // the run's config_text after the captured-job line, so `check` judges the job against the
  // plan of that layout.  Rank 0 writes it into the run file at once (a job killed while it
  // hangs still carries it).  The run's `modules` rows and this rank's `ranks` rows become the
  // layout's (its module, tp/cp/pp/dp coordinates; the job's own global stage and warmup from
  // its "# job schedule:" line, else the plan's).  Needs start(); throws std::invalid_argument
  // when the text is not a valid config for this world (one line naming why).  An empty text
  // clears the declaration.
  void declareLayout(const std::string& configText);

  // Marks the run finished: rank 0 updates the run row (status, steps seen, end time); every
  // rank records how it ended (events/DiagnosisKind.h: `rank_end` when the job left normally,
  // `rank_failed` with `reason` otherwise), flushes and closes its shard.  Idempotent; never
  // throws.
  void finish(events::RunStatus status, const std::string& reason);
  // The process is dying (std::terminate: an exception nothing caught, e.g. Gloo's "Received
  // data size doesn't match expected size" on its own thread): every operation still pending
  // is recorded as failed with `why` (what it expected: peer, channel, bytes), the rank's end
  // as `rank_failed` "aborted: why", and the shard is flushed and closed, so what was recorded
  // before survives.  Gives up on the session's lock after 2 s (never deadlocks a dying
  // process).  Never throws.
  void aborted(const std::string& why);
  // A failed or timed-out operation: recorded as a diagnosis (what this rank waits on) and
  // flushed at once, so it survives the job being killed next.
  void failure(events::DiagnosisRecord d);

  // The hang watchdog of this process (started with the session; null before).
  HangWatchdog* watchdog();
  // The timeout after which an operation of a group whose own timeout is `groupTimeout`
  // counts as stuck: the configured hang timeout, else the group's.
  std::chrono::milliseconds hangTimeoutFor(std::chrono::milliseconds groupTimeout) const;
  // What the watchdog found: the rank has waited `stuckNs` on `w` (`what`: the operation in
  // words).  Records the `waits` row and a `timeout` diagnosis, flushed at once; the run
  // ends `hung`.
  void stuck(events::WaitRecord w, const std::string& what, int64_t stuckNs);
  // A reported operation completed after all, `tookNs` after its post: a `late_completion`
  // diagnosis (rank, iteration, action_seq of its waits row) says so; the run is no longer
  // hung on its account.
  void lateCompletion(const events::WaitRecord& w, const std::string& what, int64_t tookNs);
  // An operation's wait failed with `error` (c10d's own timeout, a lost peer): a `timeout` or
  // `op_failed` diagnosis, and for a timeout the `waits` row unless the watchdog (`reported`)
  // wrote it already; flushed at once.
  void failed(events::WaitRecord w, const std::string& what, const std::string& error,
              bool reported);

 private:
  CaptureSession() = default;
  ~CaptureSession();
  void finishLocked(events::RunStatus status, const std::string& reason);
  events::RunInfo runInfo(events::RunStatus status, const std::string& reason) const;
  // This rank's `ranks` rows: the declared layout's with host, device and pid, or the
  // placeholder of an undeclared job (module "job", stage = rank).
  std::vector<events::RankInfo> rankRows(std::vector<events::RankInfo> declared) const;
  // Rank 0: the run file's run row and modules, in one transaction.
  void writeRunFileInfo(const events::RunInfo& info) const;

  mutable std::mutex mu_;
  CaptureConfig cfg_;
  bool configured_ = false;
  bool shapePreambles_ = false;
  int batch_ = -1, batches_ = 0;
  std::string declaredLayout_;  // declareLayout's text, appended to the run's config_text
  // The declared layout's modules and microbatches: the run's `modules` rows and
  // run.microbatches (none declared: one module "job" of kind "captured", 0 microbatches).
  std::vector<events::ModuleInfo> declaredModules_;
  std::vector<events::JobStage> declaredSchedule_;  // the job's own stages (table job_schedule)
  int declaredMicrobatches_ = 0;
  // The rank's end (events/DiagnosisKind.h) as a diagnosis row: `rank_end` for Completed, else
  // `rank_failed` with `reason`.  Needs mu_ and an open writer.
  void recordEndLocked(events::RunStatus status, const std::string& reason);
  std::unique_ptr<events::Recorder> writer_;
  storage::ShardWriter* shard_ = nullptr;  // writer_ as what it is (replaceRanks)
  events::NullRecorder null_;
  int rank_ = -1, worldSize_ = 0;
  int iteration_ = 0, maxIteration_ = 0, seq_ = 0;
  int64_t startUnixMs_ = 0;
  bool finished_ = false, failed_ = false, timedOut_ = false;
  int stuckNow_ = 0;  // operations reported stuck that have not completed or failed since
  std::string firstFailure_, firstStuck_;
  std::map<std::tuple<std::string, int, int, int>, int> channels_;
  std::map<std::string, int> collectives_;
  std::map<const void*, ExpectedRole> roles_;
  std::unique_ptr<HangWatchdog> watchdog_;
};

}  // namespace stagescope::capture
