// Alignment of two runs by logical identity, never by rank number (DESIGN "Layout
// independence"), with a judgement per item and the causally first divergence.  `compare`
// (text/Markdown/JSON/HTML), `check --against` and the viewer's compare panel all call
// alignRuns(); nothing else decides whether two runs agree.
//
// Items (logical identity):
//   transfer  edge + direction + iteration + global microbatch (the sender's replica dp and its
//             microbatch mb: global = mb * D + dp, D = the sender module's dp size); TP copies of
//             one message are one item.  Messages of a module whose pp, dp or samples per
//             replica differ between the runs name other layer boundaries / replicas under
//             that key: where both sample layouts are known and the global batch is the same,
//             they are aligned instead by (logical edge, direction, iteration, samples) -- a
//             bridge, or the layer boundary a P2P message crosses ("llm:layer2") -- in blocks
//             of samples both runs' messages share (AlignTransfers.cpp); a boundary only one
//             layout cuts is NotAligned (not compared, not missing), as is every such message
//             when a layout is unknown.
//   loss      iteration + global microbatch (same numbering; TP copies counted once); the
//             iteration's mean loss (microbatch -1 rows: every replica holds the global mean)
//             as iteration + "mean"
//   gradient  iteration + full parameter name of the reduced gradient (TP shards gathered);
//             the initial parameters (phase param_initial, level full) as "initial" + name;
//             the per-microbatch accumulated gradients as name + iteration + dp replica +
//             local microbatch, where both runs split the global batch alike: the same
//             microbatches, and the module's and the llm's dp and samples per replica (else
//             the partial sums are of other samples: counted, not aligned)
//   input     module + iteration + global sample (Samples.h): each row of `inputs` cut into its
//             samples, so two layouts' inputs align whatever their split, and two replicas whose
//             samples were exchanged differ; TP copies counted once.  Only where both runs
//             recorded inputs (level full) and both layouts are known.
//
// Same global batch (Samples.h globalBatchIdentity): the same seed, the same number of samples
// per iteration and the same sample shapes, however microbatches x micro_batch_size x dp split
// them; runs whose configs are unknown (captured jobs) fall back to microbatches x llm dp.
// Reduced gradients and iteration-mean losses are of the global batch: always aligned.  A
// message or a microbatch loss is aligned only where it holds the same samples in both runs
// (its module's dp and samples per replica agree): else NotAligned, never compared.
//
// Judgement per item, with the evidence that decided it:
//   Values     both sides carry payloads (level full): bitwise equal -> Identical, else relative
//              L2 distance within the tolerance rule (Tolerance.h) -> WithinTolerance, else Differ;
//              float32 reduced gradients of iteration 0 also element-wise (elementDistance)
//   Checksums  level stats: equal -> Identical; different with the same layout on both sides ->
//              Differ (a layout computes bitwise reproducibly); different layouts -> fallback:
//   Norms      (labelled fallback) L2 norms within the tolerance -> WithinTolerance, else Differ
//   None       nothing to compare (level meta/off): Unjudged
//
// Initial parameters: bitwise when both runs have the same layout (one seed and layout draw
// the same bytes; any other byte is Differ), by the tolerance rule of an iteration-0 gradient
// otherwise (floor 0: a parameter's norm is not a gradient's).  Accumulated gradients are
// judged by checksums (same layout) or norms (fallback), never by values: `compare` loads them
// without payloads (storage::LoadOptions::comparedGradients), and the library on a whole model
// must give the same verdict.
//
// Order: items are sorted in causal order (Causal.h) of run A (run B for items only in B), so the
// first Differ is the causally first divergence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/Causal.h"
#include "core/analysis/Tolerance.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

enum class ItemKind : uint8_t { Transfer, Loss, Gradient, Input };
inline constexpr size_t kItemKinds = 4;
enum class ItemState : uint8_t {
  Identical,
  WithinTolerance,
  Differ,
  OnlyA,
  OnlyB,
  NotAligned,
  Unjudged
};
enum class Evidence : uint8_t { Values, Checksums, Norms, None };
const char* toString(ItemKind k);
const char* toString(ItemState s);  // "identical", "within tolerance", "differ", "only in A", ...
const char* toString(Evidence e);   // "values", "checksums", "norms (fallback)", "none"

struct AlignedItem {
  ItemKind kind = ItemKind::Transfer;
  std::string key;  // logical identity, e.g. "vision->llm activation it1 gmb2"
  int iteration = -1;
  int microbatch = -1;  // global microbatch (transfers, losses); -1 for gradients
  std::string edge;     // transfers
  events::Direction direction = events::Direction::Activation;
  std::string param;  // gradients
  // Gradients: which records (Reduced, ParamInitial or Accumulated); accumulated ones also
  // carry the replica `dp` and the local microbatch (in `microbatch`).
  events::GradPhase phase = events::GradPhase::Reduced;
  int dp = -1;
  // Inputs: the module (in `param`'s place) and the global sample; `dp` and `microbatch` are
  // those of run A's row (run B's when only B has it).
  std::string module;
  int64_t sample = -1;
  ItemState state = ItemState::Identical;
  Evidence evidence = Evidence::None;
  // Representative record per run: index into transfers (the send side, lowest tp), losses, or
  // gradients (first shard); -1 when absent.
  int64_t a = -1, b = -1;
  double valueA = 0, valueB = 0;          // loss value or L2 norm (NaN kept as NaN)
  uint64_t checksumA = 0, checksumB = 0;  // first sender checksum / first shard checksum
  double distance = 0;                    // relative L2 distance (Values/Norms), 0 when Identical
  double tolerance = 0;                   // the bound applied (Tolerance.h)
  int64_t worstElement = -1;              // Values: the element with the largest difference
  // Values, reduced gradients of iteration 0 (both runs from the same parameters), float32:
  // the element-wise distance (Tolerance.h, elementDistance) and its bound; an item within the
  // relative L2 bound with elementRatio > elementBound is Differ.  -1: not judged element-wise.
  double elementRatio = -1, elementBound = -1;
  // Transfers: the message's own sender and receiver disagree inside run A (1), B (2) or both
  // (3) — a corrupt message in that run, not a difference between the runs.
  int sidesDisagreeIn = 0;
  CausalKey causal;  // in run A (run B for OnlyB)
  bool diverged() const { return state == ItemState::Differ; }
};

struct AlignOptions {
  ToleranceRule tolerance;  // dtype and --tol applied by the caller (toleranceFor)
};

struct Alignment {
  std::vector<AlignedItem> items;  // causal order
  int64_t firstDivergence = -1;    // index of the first Differ item, -1 when none
  size_t identical = 0, withinTolerance = 0, differ = 0, onlyA = 0, onlyB = 0, notAligned = 0,
         unjudged = 0;
  // Per kind: [Transfer, Loss, Gradient, Input] counts of compared items and the evidence used.
  size_t compared[kItemKinds] = {0, 0, 0, 0};
  size_t byEvidence[4] = {0, 0, 0, 0};                 // indexed by Evidence
  double maxDistance[kItemKinds] = {0, 0, 0, 0};       // largest distance per kind among compared
  size_t notAlignedByKind[kItemKinds] = {0, 0, 0, 0};  // NotAligned items per kind
  // Of the compared items above: iteration-mean losses (in [Loss]), initial parameters and
  // accumulated gradients (in [Gradient]); initialBitwise of the initial ones were identical.
  size_t meanLossesCompared = 0, initialCompared = 0, initialBitwise = 0, accumulatedCompared = 0;
  // Accumulated gradient records of modules whose dp (or the llm's) differs between the runs:
  // not aligned (other samples), counted in both runs together.
  size_t accumulatedNotAligned = 0;
  bool sameLayout = true;       // every module has the same tp/pp/dp/cp in both runs
  bool sameGlobalBatch = true;  // the same samples every iteration (Samples.h)
  std::string globalBatchNote;  // why not, when !sameGlobalBatch
  // How sameGlobalBatch was decided: "samples" (both configs known) or "microbatches x llm dp
  // (a layout is unknown: ...)".
  std::string globalBatchEvidence;
  // Why inputs were not aligned at all ("" when they were, or neither run recorded any): one
  // run recorded none (below level full), or a layout is unknown.
  std::string inputsNotCompared;
  const AlignedItem* first() const {
    return firstDivergence >= 0 ? &items[static_cast<size_t>(firstDivergence)] : nullptr;
  }
};

Alignment alignRuns(const model::RunModel& a, const model::RunModel& b,
                    const AlignOptions& opts = {});

}  // namespace stagescope::analysis
