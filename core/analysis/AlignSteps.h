// The steps of alignRuns (Align.h), one file per item kind, and what they share: what
// alignment knows of both runs (AlignContext), what it builds of each run alone (RunSide) and
// the judgements every kind applies.  Internal to core/analysis: callers use Align.h.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/analysis/Align.h"
#include "core/analysis/Samples.h"
#include "core/analysis/Values.h"

namespace stagescope::analysis::align {

struct ModuleShape {
  int tp = 0, pp = 0, dp = 0, cp = 0;
  bool operator==(const ModuleShape&) const = default;
};
using ModuleShapes = std::map<std::string, ModuleShape>;
ModuleShapes modulesOf(const model::RunModel& run);
int dpSize(const ModuleShapes& m, const std::string& module);  // 1 when unknown

// A message's logical identity across runs: edge, direction, iteration, global microbatch and
// the dp replica it reaches (a bridge) or leaves (P2P).  Ordered with the edge by its text.
struct TKey {
  events::Name edge;
  int direction = 0, iteration = -1, globalMb = -1, dp = -1;
  auto tie() const { return std::tie(edge, direction, iteration, globalMb, dp); }
  bool operator<(const TKey& o) const { return tie() < o.tie(); }
  bool operator==(const TKey& o) const { return tie() == o.tie(); }
};

// One message of a run: its pairs' sides, every TP copy together.
struct TGroup {
  TKey key;
  int dstDp = -1;
  int64_t send = -1, recv = -1;     // representative sides (lowest sender tp)
  std::vector<uint64_t> checksums;  // every side, every TP copy (0 = not recorded); sorted, unique
  bool sidesDisagree = false;       // a receive recorded another checksum than its send
  bool aligned = true;
  // Of a message not aligned by its key (aligned false) where the run's sample layout is
  // known: the global samples it carries, [firstSample, firstSample + samples) (Samples.h: a
  // bridge message carries what its sender's and receiver's replicas share), and for a P2P
  // message the layer its module is cut before (RunSetup.h, stageFirstLayersOf).  Two layouts'
  // messages are aligned by these instead (AlignTransfers.cpp).  -1 / 0: unknown.
  int64_t firstSample = -1;
  int32_t samples = 0;
  int32_t boundaryLayer = -1;
};

// What decides a run's message keys: the modules whose messages are not aligned by key
// (below), and what places a message by its samples and layer boundary instead.
struct GroupingRules {
  // Modules whose pipeline depth or replica count (or samples per replica) differ between the
  // runs: their P2P edges name other layer boundaries / replicas (`unaligned`), their bridges
  // other replica pairs (`otherReplicas`).
  std::set<std::string> unaligned, otherReplicas;
};

// The groups of a run's messages, sorted by key (AlignTransfers.cpp); `layout`: the run's own.
std::vector<TGroup> transferGroups(const model::RunModel& run, const GroupingRules& rules,
                                   const SampleLayout& layout);

// What alignment needs of one run, independent of the other run: its causal order, its
// message groups and its gradients gathered per parameter.  Holds references into the run:
// neither copied nor moved.
struct RunSide {
  RunSide(const model::RunModel& run, const GroupingRules& rules, const SampleLayout& layout)
      : order(run),
        groups(transferGroups(run, rules, layout)),
        gradients(gatherGradients(run, events::GradPhase::Reduced, true)),
        initial(gatherGradients(run, events::GradPhase::ParamInitial, true)),
        accumulated(gatherAccumulated(run, false)) {}
  RunSide(const RunSide&) = delete;
  RunSide& operator=(const RunSide&) = delete;

  CausalOrder order;
  std::vector<TGroup> groups;
  std::vector<GatheredGradient> gradients;
  std::vector<GatheredGradient> initial;      // phase ParamInitial (level full)
  std::vector<GatheredGradient> accumulated;  // per (iteration, param, dp, microbatch), no values
};

// What every step knows of the two runs.
struct AlignContext {
  AlignContext(const model::RunModel& x, const model::RunModel& y, const ToleranceRule& r)
      : a(x), b(y), rule(r) {}
  const model::RunModel& a;
  const model::RunModel& b;
  const ToleranceRule& rule;
  ModuleShapes ma, mb;
  SampleLayout la, lb;
  bool layoutsKnown = false;  // both sample layouts (Samples.h)
  bool sameFunction = true;   // both runs' checksums come from one function
  GroupingRules grouping;
  // What a gradient message of each run holds per unit of its samples' loss gradient: the loss
  // scale over (microbatches x the llm's samples per replica), the engine's normalisation of
  // each microbatch's mean loss.  Two layouts' gradient messages aligned by samples are
  // compared divided by it (docs/analysis.md, "Messages of two layouts"); 1 when unknown.
  double gradientScaleA = 1, gradientScaleB = 1;
  const RunSide* sideA = nullptr;
  const RunSide* sideB = nullptr;
  std::map<int, double> modelNorm;  // per iteration: the larger run's whole-model gradient norm
  // The floor of relative gradient differences in `iteration` (Tolerance.h).
  double floorOf(int iteration) const;
};

// Every key of either run's index once, in key order: the items an aligner walks.
template <class Map>
std::set<typename Map::key_type> keysOfEither(const Map& x, const Map& y) {
  std::set<typename Map::key_type> keys;
  for (const auto& kv : x) keys.insert(kv.first);
  for (const auto& kv : y) keys.insert(kv.first);
  return keys;
}

// ---- judgements (AlignJudge.cpp)
bool sameValue(double x, double y);  // equal, or both NaN
void judgeByNorms(AlignedItem& it, double normA, double normB, double floor, double tol);
void judgeByValues(AlignedItem& it, const std::vector<double>& a, const std::vector<double>& b,
                   double floor, double tol);
// An item within its relative L2 bound, also judged element by element where `bound` >= 0
// (ToleranceRule::elementBound): Differ when one element is off.
void judgeElements(AlignedItem& it, const std::vector<double>& a, const std::vector<double>& b,
                   double floor, double bound);
// Judges gathered tensors without values: equal shard checksums of one shard layout are
// identical; other bytes under the same run layout differ (a layout computes bitwise
// reproducibly); else their norms (fallback).
void judgeByChecksumsOrNorms(AlignedItem& it, const GatheredGradient& x, const GatheredGradient& y,
                             bool sameFunction, bool sameLayout, double floor, double tol);
// Both runs' sides of a gradient item (reduced, initial or accumulated): the representative
// record (the first shard), its norm and checksum, and the causal key (run A's; run B's when
// only B has the item).
void setGradientSides(AlignedItem& it, const GatheredGradient* x, const GatheredGradient* y,
                      const AlignContext& c);
// What the presence of a gradient item's two sides decides alone: only in one run, or shards
// that do not cover the tensor (never equal).  False when both are whole and must be judged.
bool decidedByPresence(AlignedItem& it, const GatheredGradient* x, const GatheredGradient* y);

// ---- one aligner per item kind: each appends its items to out.items
void alignTransfers(const AlignContext& c, Alignment& out);             // AlignTransfers.cpp
void alignLosses(const AlignContext& c, Alignment& out);                // AlignLosses.cpp
void alignReducedGradients(const AlignContext& c, Alignment& out);      // AlignGradients.cpp
void alignInitialParameters(const AlignContext& c, Alignment& out);     // AlignGradients.cpp
void alignAccumulatedGradients(const AlignContext& c, Alignment& out);  // AlignGradients.cpp
void alignInputs(const AlignContext& c, Alignment& out);                // AlignInputs.cpp

}  // namespace stagescope::analysis::align
