// The NCCL replay: would this run hang on GPUs?  Each rank's recorded communication, in its
// posting order, replayed under a model of NCCL and PyTorch's ProcessGroupNCCL (the rules and
// their sources: docs/nccl-replay.md).  A run over Gloo can complete where NCCL deadlocks,
// because Gloo connects a group's members when the group is created and buffers sends; NCCL
// initialises communicators lazily (collectively, blocking the host) and a send completes only
// when its receive runs on the peer.  The replay says whether every rank would complete and,
// if not, the predicted wait-for cycle, the rule that blocks each rank and the operation that
// would have to move.
//
// The rules (NcclRule): a communicator is initialised at its first use by all its members
// together, blocking each one's host until the last arrives (lazy; `eager` initialises every
// group's communicator at creation); a plain send/recv uses a 2-rank communicator per pair and
// group, a batch (one batch_isend_irecv) and a collective use the group's communicator, so the
// first batch on a group must be joined by every member; a batch's operations progress together
// and complete together; a send completes only when the matching receive runs on the peer (no
// buffering); operations on one communicator run in their posting order; collectives run in
// the same order on all members.
//
// Input: the read model only.  A stagescope run is replayed from its plan (the per-rank
// action lists the engine executes; combined send+receive actions are one batch), a captured
// job from its recorded operations (actions rows of its point-to-point ops and its collectives
// rows, in the order of their post times on the rank's clock; it waited for an operation before
// posting the next when the operation's end precedes that post).  What the file cannot tell (in
// files without the p2p_batches table, which captured operations one batch_isend_irecv posted; a
// group's members) is said in `unknowns`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

enum class NcclRule : uint8_t {
  LazyInit = 0,          // a communicator is initialised by all its members together
  FirstBatchAllMembers,  // the first batch on a group initialises the group's communicator
  BatchTogether,         // a batch completes only when all its operations progress
  NoBuffering,           // a send completes only when the receive runs on the peer
  CommunicatorOrder,     // operations on one communicator run in posting order
  CollectiveOrder,       // collectives run in the same order on all members
};
const char* toString(NcclRule r);  // "lazy_init", "first_batch", ...

// One communication operation of one rank, as NCCL would see it.
struct NcclOp {
  enum class Kind : uint8_t { Send, Recv, Collective };
  Kind kind = Kind::Send;
  int rank = -1;
  int peer = -1;             // send/recv: the other side's global rank
  std::string group;         // the c10d group ("llm/pp", "bridge:vision->llm", "dp", "world")
  std::vector<int> members;  // the group's global ranks, ascending; empty: not known
  std::string op;            // a collective's name ("all_reduce")
  int batch = -1;            // >= 0: posted together with the rank's other ops of this batch
  int64_t bytes = -1;        // a send/recv's bytes (its recorded messages); -1: not known
  int iteration = -1, seq = -1;
  std::string what;  // "the activation of microbatch 2", "all_reduce #0": for sentences
};

// One step of a rank's host program: post ops (one batch, one op or one collective), or wait
// until ops completed.
struct NcclStep {
  bool wait = false;
  std::vector<int> ops;  // indices into the rank's NcclProgram::ops
};

struct NcclProgram {
  std::vector<std::vector<NcclOp>> ops;      // [rank] in posting order
  std::vector<std::vector<NcclStep>> steps;  // [rank]
  std::string source;                        // "the plan of a stagescope run", ...
  std::vector<std::string> unknowns;         // what the file does not record, in words
  bool batchesRecorded = true;  // false: a capture, whose batch_isend_irecv calls are unknown
  bool fromPlan = false;        // a stagescope run's plan (combined actions taken as batches)
  size_t opCount() const;
};

struct NcclReplayOptions {
  // Communicators of every group exist from its creation (init_process_group(device_id=...));
  // plain send/recv then use the group's communicator instead of one per pair.
  bool eager = false;
  // A stagescope run: its combined actions (SF_RB, SB_RF) posted as one batch.  false: as the
  // engine's Communicator posts them on c10d today, one op after another (sends first).
  bool engineCombinedAsBatch = true;
  // A capture: consecutive point-to-point ops on one group posted with no wait between them
  // are taken as one batch (what batch_isend_irecv would have posted).
  bool captureCandidateBatches = false;
  // Gloo's model instead of NCCL's, to show what differs: every group connected at creation,
  // a send complete when posted (buffered), a receive when its send was posted; collectives
  // still in one order per group.  What the run did on CPU; tests set it to prove a predicted
  // hang is NCCL's alone.
  bool glooModel = false;
  // NCCL in practice, beyond its documented semantics: a send of at most this many bytes (known)
  // completes into the connection's buffer once the communicator exists, before its receive
  // runs (NCCL_BUFFSIZE, 4 MiB by default).  0: no buffering (the documented rule).
  int64_t bufferedSendBytes = 0;
};

// NCCL_BUFFSIZE's default: what NCCL buffers per connection before a send needs its receive.
inline constexpr int64_t kNcclDefaultBufferBytes = 4 << 20;

// Builds the program from a run; `opts` choose how the unknowns above are filled.
NcclProgram ncclProgramOf(const model::RunModel& run, const NcclReplayOptions& opts = {});

// Why one rank cannot finish.
struct NcclBlocked {
  int rank = -1;
  NcclRule rule = NcclRule::NoBuffering;
  int waitsOn = -1;      // the rank it waits for (-1: none can be named)
  std::string sentence;  // "rank 3 waits to send the activation of microbatch 0 to rank 4 ..."
  std::string brief;     // the same in a few words, for the headline
};

struct NcclReplayResult {
  bool completed = false;
  size_t ops = 0, ranks = 0, communicators = 0;
  std::vector<NcclBlocked> blocked;  // one per rank that cannot finish, by rank
  std::vector<int> cycle;            // ranks of the wait-for cycle, in order (empty: none)
  std::string headline;              // one line, <= ~200 characters
  std::vector<std::string> details;  // one line per blocked rank, then the fix
  std::string fix;                   // the operation that would have to move
};

NcclReplayResult replayNccl(const NcclProgram& program, const NcclReplayOptions& opts = {});

// The verdict check's nccl_replay uses: the replay of a run with the default model (lazy
// initialisation), and for a capture without recorded batches a second replay with candidate
// batches, so that a hang that depends only on what the file does not record is not called a
// hang.
struct NcclVerdict {
  // CompletesIfBuffered: hangs under the documented rules, completes only because NCCL buffers
  // sends below its buffer size (every send of the cycle is that small): passes, and says so.
  enum class Kind : uint8_t {
    Completes,
    Hangs,
    Undetermined,
    NothingToReplay,
    CompletesIfBuffered
  };
  Kind kind = Kind::NothingToReplay;
  std::string summary;  // one line
  NcclReplayResult replay;
};
NcclVerdict ncclVerdict(const model::RunModel& run);

}  // namespace stagescope::analysis
