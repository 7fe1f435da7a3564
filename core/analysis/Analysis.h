// Shared analyses over the read model used by `check`, `compare`, `export` and the viewer:
// send/recv pairing, logical transfer keys in schedule order, gathering of TP gradient shards into
// full parameters, a causal (happens-before) clock over actions, and per-rank time accounting with
// the measured pipeline bubble.
//
// Conventions shared by every function here:
//   * Action times are on rank 0's clock: the reader subtracts RankInfo::clockOffsetNs once
//     (RunModel::clockOffsetsApplied); nothing here subtracts it again.
//   * Schedule order of messages: (iteration, microbatch, activations before gradients,
//     activations in pipeline order (source global stage ascending), gradients in reverse
//     pipeline order (source global stage descending), edge name, source dp replica).
#pragma once

#include "core/analysis/Bubble.h"
#include "core/analysis/Causal.h"
#include "core/analysis/Format.h"
#include "core/analysis/Pairing.h"
#include "core/analysis/Values.h"
