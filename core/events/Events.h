// The events vocabulary: plain, torch-free records of what a run planned and did.
//
// Contract: these structs are the only thing that crosses from the engine (core/engine, which
// links LibTorch) to storage (SQLite) and from storage to every reader (ui, check, compare,
// export).  Times are nanoseconds of the recording host's monotonic clock (CLOCK_MONOTONIC);
// `seq` numbers give the causal order on one rank.  Ranks are global ranks unless a field
// says "group".  Iterations, microbatches and sequence numbers start at 0; -1 means "none".
// Texts and integer lists that repeat across millions of records (parameter, module, dtype and
// edge names; shapes; peer lists) are interned handles (events::Name, events::Shape,
// events::RankList: 8 bytes each, never freed, read like the std::string / std::vector they
// replace); one-off texts (messages, config, host names) stay std::string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Bytes.h"
#include "core/events/Checksum.h"
#include "core/events/DiagnosisKind.h"
#include "core/events/InternedList.h"
#include "core/events/Name.h"

namespace stagescope::events {

// One scheduled action on one rank.  The 1F1B plan is a list of these per rank; the engine
// executes exactly that list, and records each with its start and end time.
enum class ActionKind : uint8_t {
  Forward = 0,              // forward of one microbatch through this rank's module stage
  Backward,                 // backward of one microbatch
  RecvForward,              // receive activations (P2P or bridge)
  SendForward,              // send activations
  RecvBackward,             // receive gradients
  SendBackward,             // send gradients
  SendForwardRecvBackward,  // combined (steady state), paired so it cannot deadlock
  SendBackwardRecvForward,  // combined (steady state)
  DpReduce,                 // data-parallel gradient reduction after the last backward
  OptimizerStep,            // optimizer step at the end of an iteration
  Count
};
const char* toString(ActionKind kind);

// A planned or executed action.  For communication actions `peers` lists the global ranks
// this rank exchanges with in that action (several for a bridge fan-in/fan-out).
struct ActionRecord {
  int32_t rank = -1;
  int32_t iteration = -1;
  int32_t seq = -1;  // index in this rank's action list of this iteration
  ActionKind kind = ActionKind::Forward;
  int32_t microbatch = -1;
  int32_t stage = -1;  // pp index within the module
  Name module;         // module this action belongs to ("" for rank-wide actions)
  RankList peers;
  int64_t startNs = 0;
  int64_t endNs = 0;
};

enum class Direction : uint8_t { Activation = 0, Gradient = 1 };
enum class EdgeKind : uint8_t { P2P = 0, Bridge = 1 };
enum class BridgeRole : uint8_t { None = 0, OneToOne, FanIn, FanOut };
enum class Side : uint8_t { Send = 0, Recv = 1 };
const char* toString(Direction d);
const char* toString(EdgeKind k);
const char* toString(BridgeRole r);
const char* toString(Side s);

// Summary statistics of a tensor's values (float64 accumulation).  min, max and mean are over
// the finite elements; NaN and ±Inf are counted.  Any double here may itself be non-finite
// (an l2 that overflowed); the run file stores such values faithfully (docs/run-file.md).
struct TensorStats {
  double min = 0, max = 0, mean = 0, l2 = 0;
  int64_t nanCount = 0, infCount = 0;
  int64_t numel = 0;
};

// One point-to-point message as seen by one side.  Every message is recorded twice: by the
// sender (side=Send) and by the receiver (side=Recv); pairing key = (edge, direction,
// iteration, microbatch, srcRank, dstRank).
struct TransferRecord {
  int32_t rank = -1;  // the recording rank (srcRank when side=Send, dstRank when side=Recv)
  Side side = Side::Send;
  int32_t srcRank = -1, dstRank = -1;            // global ranks
  int32_t srcGroupRank = -1, dstGroupRank = -1;  // ranks inside the group used for the message
  Name edge;  // "llm:pp0->pp1" for P2P, "vision->llm" for a bridge
  EdgeKind edgeKind = EdgeKind::P2P;
  BridgeRole role = BridgeRole::None;
  Direction direction = Direction::Activation;
  bool hasStats = false;  // `stats` holds values
  int32_t iteration = -1, microbatch = -1;
  int32_t actionSeq = -1;  // the ActionRecord.seq this message belongs to
  Shape shape;
  Name dtype;  // "float32", "bfloat16", ...
  int64_t bytes = 0;
  uint64_t checksum = 0;  // checksumBytes (XXH3-64) of the raw contiguous bytes; 0 = none
  TensorStats stats;
  int64_t startNs = 0, endNs = 0;
  std::vector<uint8_t> payload;  // raw bytes, only at level full
};

// What a gradient (or parameter) record describes.
enum class GradPhase : uint8_t {
  Accumulated = 0,  // parameter .grad after the backward of `microbatch` (accumulating)
  Reduced,          // after the data-parallel reduction (final gradient of the iteration)
  ParamAfterStep,   // the parameter values after the optimizer step
  ParamInitial,     // the initial parameter shard (level full only carries values)
  Reference,        // the single-process reference gradient of the full parameter
};
const char* toString(GradPhase p);

// One parameter shard's gradient (or value) at one point of the step.
struct GradientRecord {
  int32_t rank = -1;
  int32_t iteration = -1, microbatch = -1;  // microbatch -1 for Reduced/ParamAfterStep
  GradPhase phase = GradPhase::Accumulated;
  bool hasStats = false;  // `stats` holds values
  Name param;             // full logical name, layout independent: "llm.layers.3.attn.q.weight"
  Name module;
  int32_t tp = 0, pp = 0, dp = 0;
  int32_t partitionDim =
      -1;  // dimension along which the full tensor is split by TP (-1: replicated)
  int64_t partitionOffset = 0;  // offset of this shard along partitionDim in the full tensor
  Shape shape;                  // shard shape
  Shape fullShape;              // full (unsharded) shape
  Name dtype;
  double norm = 0;
  uint64_t checksum = 0;
  TensorStats stats;
  Bytes payload;  // raw values at level full (8 bytes when empty: millions of these at stats)
};

// Loss of one microbatch (value before the /m normalisation) on a last-stage rank, or of the
// single-process reference (then rank is -1 and it travels as Recorder::referenceLoss, into
// its own table).  `loss` may be NaN or ±Inf and is stored and read back as such.
struct LossRecord {
  int32_t rank = -1;
  int32_t iteration = -1, microbatch = -1;  // microbatch -1: mean over the iteration
  int32_t dp = 0;
  double loss = 0;
};

// The input of one microbatch on a first-stage rank (level full): tokens or patches.
struct InputRecord {
  int32_t rank = -1;
  int32_t iteration = -1, microbatch = -1;
  Name module;
  Name name;  // "tokens", "patches"
  Shape shape;
  Name dtype;
  std::vector<uint8_t> payload;
};

// Where a rank sits.  A rank belongs to exactly one module in supported layouts.
struct RankInfo {
  int32_t rank = -1;
  std::string module;
  int32_t tp = 0, cp = 0, pp = 0, dp = 0;
  int32_t globalStage = 0;  // stage index along the longest path through the module DAG
  int32_t totalStages = 0;
  int32_t warmup = 0;  // 1F1B warmup forwards
  std::string host;
  std::string device;  // "cpu", "cuda:0"
  int64_t pid = 0;
  // This host's monotonic clock minus rank 0's, estimated at rendezvous, and the estimate's
  // uncertainty (half-width, ns; -1 = not estimated).  Raw in the file; subtracted once, by
  // the reader (storage::LoadOptions::applyClockOffsets), never again by a consumer.
  int64_t clockOffsetNs = 0;
  int64_t clockOffsetUncertaintyNs = -1;
};

// Closed vocabularies of the config that the run file and the read side also use.  Each is
// parsed once, from its text, by the config reader (core/plan/Config.cpp) or the run file's
// reader (storage); everything else compares the enum and prints toString().  The enumerators
// are in the order the config's error messages list them ("expected one of encoder, llm").
// A module's role in the model ([[modules]] kind): the one llm, or an encoder feeding it.
enum class ModuleKind : uint8_t { Encoder = 0, Llm };
const char* toString(ModuleKind k);
bool parseModuleKind(const std::string& text, ModuleKind* out);
// The dtype a run computes in (config `dtype`: float32 or bfloat16; Float64 only for the
// reference's float64 trajectory, app/ReferenceRecord, never a config's).  Not the dtype a
// record names (TransferRecord::dtype and the like): that is data from the wire and stays text.
enum class Dtype : uint8_t { Float32 = 0, BFloat16, Float64 };
const char* toString(Dtype d);
bool parseDtype(const std::string& text, Dtype* out);
// The optimizer of a run ([optimizer] kind).
enum class OptimizerKind : uint8_t { Sgd = 0, Adam };
const char* toString(OptimizerKind k);
bool parseOptimizerKind(const std::string& text, OptimizerKind* out);

// One module's grid as configured.
struct ModuleInfo {
  std::string name;
  // toString(ModuleKind) for stagescope's runs; free text in the run file (a captured job
  // writes "captured"), so it stays text here and is compared through isLlm()/isEncoder().
  std::string kind;
  bool isLlm() const { return kind == toString(ModuleKind::Llm); }
  bool isEncoder() const { return kind == toString(ModuleKind::Encoder); }
  int32_t tp = 1, cp = 1, pp = 1, dp = 1;
  int32_t offset = 0;
  int32_t layers = 0;
  std::vector<std::string> downstream;  // names of modules this one feeds
};

enum class RunStatus : uint8_t { Running = 0, Completed, Failed, Hung, Killed };
const char* toString(RunStatus s);
bool parseRunStatus(const std::string& text, RunStatus* out);

// Recording levels, ordered: each includes everything of the previous one.
enum class RecordLevel : uint8_t { Off = 0, Meta, Stats, Full };
const char* toString(RecordLevel l);
bool parseRecordLevel(const std::string& text, RecordLevel* out);

// The [record] filters of a run: which iterations, modules and ranks were recorded (empty
// list: all).  One rule for every table: a record is kept when keeps(iteration, module of
// its rank, rank); run, rank, diagnosis and wait records are always kept.
struct RecordFilter {
  std::vector<int32_t> iterations;
  std::vector<std::string> modules;
  std::vector<int32_t> ranks;
  bool all() const { return iterations.empty() && modules.empty() && ranks.empty(); }
  bool keepsRank(int32_t rank, const std::string& module) const;
  bool keepsIteration(int32_t iteration) const;
  bool keeps(int32_t iteration, const std::string& module, int32_t rank) const {
    return keepsIteration(iteration) && keepsRank(rank, module);
  }
};

// The resolved settings a stagescope run computed with, as far as the read side needs them:
// the config after defaults and validation, typed.  Written at record time (the run file's
// `run_settings` and `module_settings` tables, docs/run-file.md), so that a run is judged by
// what ran, never by what a later parser and its defaults make of the stored config text.
// Filled from plan::RunConfig by one function (plan::runSettings, core/plan/RunLayout.h); the
// run's iterations, microbatches, record filter and grids are RunInfo's own fields.
struct ModuleSettings {
  std::string name;
  ModuleKind kind = ModuleKind::Encoder;
  int32_t dp = 1;
  int32_t patches = 0, patchDim = 0;  // one encoder sample: [patches, patchDim] floats
  int32_t textLen = 0, vocab = 0;     // one llm sample: textLen + 1 tokens below vocab
};
struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
};
struct RunSettings {
  // False when the file holds none: a captured job, or a file recorded before the tables
  // existed (core/analysis/RunSetup.h then derives them from the stored config text).
  bool recorded = false;
  uint64_t seed = 0;
  int32_t microBatchSize = 0;  // the llm's, per data-parallel replica
  Dtype dtype = Dtype::Float32;
  bool forwardOnly = false;
  double lossScale = 1;
  OptimizerSettings optimizer;
  std::vector<ModuleSettings> modules;  // config order
};

// What produced a run file (table `run_origin`, docs/run-file.md).
enum class RunOrigin : uint8_t {
  Engine = 0,  // stagescope's own engine ran the schedule (`stagescope run` / `worker`)
  Captured,    // a user's PyTorch job recorded through the stagescope c10d backend (app/capture)
};
const char* toString(RunOrigin origin);  // "engine" | "captured"
bool parseRunOrigin(const std::string& text, RunOrigin* out);

// One rank's own view of its pipeline position in one module, as a captured job declared it
// (table `job_schedule`; stagescope_torch.megatron.declare_layout computes it the way
// Megatron-Core does): the stage within the module, the stage in the whole pipeline, how many
// stages that pipeline has, and the number of warmup forwards.  -1: not declared.
struct JobStage {
  int32_t rank = -1;
  std::string module;
  int32_t stage = -1, globalStage = -1, totalStages = -1, warmup = -1;
  friend bool operator==(const JobStage&, const JobStage&) = default;
};

// Run-wide facts, written once by the launcher (rank 0 in multi-host runs).
struct RunInfo {
  std::string runId;
  std::string configText;  // the TOML as given, after --set overrides
  std::string
      configHash;  // plan::configHash: hex FNV-1a 64 (events::fnv1a64) of the canonical config
  int32_t worldSize = 0;
  int32_t iterations = 0, microbatches = 0;
  RecordLevel level = RecordLevel::Stats;
  std::vector<ModuleInfo> modules;
  std::string versionStagescope, versionTorch, versionSqlite, compiler;
  int64_t startUnixMs = 0, endUnixMs = 0;
  RunStatus status = RunStatus::Running;
  std::string statusReason;
  ChecksumFunction checksumFunction = kRecordedChecksum;  // of every checksum column
  RecordFilter recordFilter;                              // what the [record] filters kept
  RunSettings settings;  // what the run computed with (stagescope's own runs)
  RunOrigin origin = RunOrigin::Engine;
  std::vector<JobStage> jobSchedule;  // a captured job's declared view, rank order; else empty
  bool captured() const { return origin == RunOrigin::Captured; }
};

// One collective operation (all_reduce, broadcast, all_gather, ...) as seen by one member
// of its group.  Written by captured jobs (app/capture); stagescope's own engine records its
// reductions as actions.  The same collective on every member has the same (group,
// iteration, groupSeq).
struct CollectiveRecord {
  int32_t rank = -1;  // recording global rank
  int32_t iteration = -1;
  int32_t seq = -1;       // this rank's op sequence in the iteration (shared with its actions)
  int32_t groupSeq = -1;  // k-th collective on `group` in the iteration
  std::string op;         // "all_reduce", "broadcast", "all_gather", "reduce_scatter", ...
  std::string group;      // group name ("dp", "world")
  int32_t groupRank = -1, groupSize = 0;
  std::vector<int32_t> groupRanks;  // global rank of each group rank
  int32_t root = -1;                // global rank of the root (broadcast, reduce, ...), -1 none
  std::string reduceOp;             // "sum", "max", ... ("" when not a reduction)
  std::vector<int64_t> shape;       // of the first input tensor
  std::string dtype;
  int64_t bytes = 0;         // bytes of all input tensors
  uint64_t inChecksum = 0;   // FNV-1a 64 of the input bytes at post (0 below stats)
  uint64_t outChecksum = 0;  // FNV-1a 64 of the output bytes at completion
  bool hasStats = false;
  TensorStats stats;  // over all output tensors
  int64_t startNs = 0, endNs = 0;
  std::string state;             // "completed", "failed", "unwaited"
  std::vector<uint8_t> payload;  // first output tensor's bytes, level full only
};

// A point-to-point operation of a captured job that one batch_isend_irecv posted together with
// others (app/capture): its (rank, iteration, seq) names the op's `actions` row; ops of one rank
// with one `batch` were one call (NCCL: one group call, progressing together).  Batch ids count
// from 0 per rank.  `groupRanks`: the global ranks of the op's group (the members its first
// batch needs).  A file without these rows says nothing about batches (docs/run-file.md).
struct BatchMemberRecord {
  int32_t rank = -1;
  int32_t iteration = -1, seq = -1;
  int32_t batch = -1;
  std::vector<int32_t> groupRanks;
};

// A diagnosis record (hang wait-for edge, fault, first failure) written by ranks or launcher.
struct DiagnosisRecord {
  int32_t rank = -1;
  DiagnosisKind kind = DiagnosisKind::Other;
  int32_t iteration = -1, actionSeq = -1;
  int32_t waitsOnRank = -1;
  std::string message;  // one human sentence
  int64_t timeNs = 0;
  std::string otherKind;  // the row's text when `kind` is Other (a kind this build does not know)
  // The signal that ended the rank the record tells of (its own `rank`; for peer_dead the peer
  // it saw stop, `waitsOnRank`), where the writer knew it; 0: none, or not known.  Typed so that
  // a reader asks the field, never the sentence ("... killed by signal 9 (SIGKILL)").
  int32_t signal = 0;
  // The row's `kind` text.
  std::string kindName() const { return kind == DiagnosisKind::Other ? otherKind : toString(kind); }
  // Information, not a failure (events/DiagnosisKind.h): never counted among a run's problems.
  bool informational() const { return isInformational(kind); }
};

// What a rank was waiting on when its wait ran past the timeout: structured, so the wait-for
// graph is built from data, never from the sentence of a diagnosis.
enum class WaitOp : uint8_t {
  Recv = 0,    // waits for a message from `peer`
  Send,        // waits for `peer` to take a message it sent
  Broadcast,   // waits in a boundary broadcast rooted at `peer`
  Collective,  // waits in collective number `microbatch` of group `edge` (captured jobs;
               // `peer` -1: who has not joined is read from the members' collective rows)
};
const char* toString(WaitOp op);  // "recv" | "send" | "broadcast" | "collective"
bool parseWaitOp(const std::string& text, WaitOp* out);

struct WaitRecord {
  int32_t rank = -1;                        // the waiting rank
  int32_t iteration = -1, actionSeq = -1;   // the action it was executing
  ActionKind action = ActionKind::Forward;  // that action's kind
  int32_t microbatch = -1;
  int32_t peer = -1;  // the global rank waited on
  WaitOp op = WaitOp::Recv;
  std::string edge;  // transfer edge ("llm:pp0->pp1", "vision->llm") or "boundary:<group>"
  Direction direction = Direction::Activation;  // of the message (a broadcast: activation)
  double timeoutSeconds = 0;                    // how long it waited before giving up
  std::string error;                            // the backend's error text, one line
  int64_t timeNs = 0;                           // when it gave up (recording host's clock)
};

// A planted fault that acted on one of this rank's sends (the config's [[faults]], `--fault`):
// structured, so the wait-for graph explains a wait by the fault's kind, never by the sentence
// of its `fault_injected` diagnosis.  Written before the fault acts (a delay: before it sleeps).
struct InjectedFaultRecord {
  int32_t rank = -1;                       // the sending rank
  int32_t iteration = -1, actionSeq = -1;  // the send's action
  int32_t peer = -1;                       // the receiving rank
  std::vector<std::string> kinds;          // the config's kind names, in the order they act
                                           // ("delay", "drop", "corrupt", "shape", "nan", "inf")
  double delaySeconds = 0;                 // a "delay" kind's sleep (s); 0 without one
  int64_t timeNs = 0;                      // recording host's clock
};

}  // namespace stagescope::events
