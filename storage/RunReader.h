// RunReader: loads a run file (or a single shard) into the read model of storage/RunFileError.h.
//
// Contract: loadRun never crashes on a bad file; it throws RunFileError (NotFound,
// NotARunFile, NewerVersion, Corrupt) whose message names the file and the reason.  The model's
// vectors are sorted as RunModel.h documents; `pairs` pairs every send with its receive.
// Payloads are only loaded with LoadOptions::payloads; loadTransferPayload fetches one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::storage {

struct LoadOptions {
  bool payloads = false;  // load transfer/gradient/input payload bytes (level full)
  // Subtract each rank's RankInfo::clockOffsetNs from action, transfer and diagnosis times,
  // so that all ranks share rank 0's clock.  The file keeps the raw times.
  bool applyClockOffsets = true;
  bool verify = false;  // run PRAGMA quick_check first (reads the whole file)
  // Read only what a timeline shows (`export`): run, modules, ranks, actions, transfers (and
  // their pairs), diagnoses, collectives, waits and shards.  The plan, gradients, losses,
  // inputs and the reference stay empty, so such a model must never reach a check or compare.
  bool timelineOnly = false;
  // Read only what timelineOnly leaves out (the viewer's second phase): the plan, gradients,
  // losses, inputs and the reference, with the run row they need; everything else stays empty.
  // Merged into a timelineOnly model of the same file, the two make the whole model.
  bool detailsOnly = false;
  // Read only what a run's status judgement needs (`merge`: core/analysis/RunVerdict.h): run,
  // modules, ranks, plan, actions, diagnoses and shards.  Transfers, gradients, losses, inputs,
  // collectives, waits and the reference stay empty, so such a model must never reach a check,
  // compare or export.
  bool statusOnly = false;
  // Read only the gradients a comparison judges (`compare`, the --against run of `check`): rows
  // of phase Reduced (and a format-1 file's reference rows), selected in SQL.  Every other
  // gradient row (the per-microbatch Accumulated ones, 94 % of a `stats` run's gradients;
  // ParamAfterStep; ParamInitial) is not read, so not checked either (a bad value there fails a
  // whole load, not this one), and RunModel::gradientsNotLoaded counts them.  Gradient indices
  // of such a model (AlignedItem::a/b of a gradient) index its smaller vector, so a consumer that
  // indexes another model of the same file with them (the viewer) must not use it.
  bool onlyReducedGradients = false;
  // Read only the gradients `compare` judges (core/analysis/Align.h; `compare`, the --against
  // run of `check`): rows of phase Reduced and ParamInitial with their payloads, and the
  // per-microbatch Accumulated rows WITHOUT payloads (the comparison judges them by checksums
  // or norms only, and their payloads are most of a level-full file).  ParamAfterStep rows are
  // not read; RunModel::gradientsNotLoaded counts them.  Same index caveat as above.
  bool comparedGradients = false;
  // A gradients table with at least this many rows is read by two threads, each on its own
  // connection to the same snapshot, over two rowid ranges (never with onlyReducedGradients or
  // comparedGradients); a transfers table of at least this many rows in rowid chunks by a side
  // thread of its own, meanwhile the actions are read, and by the calling thread once it reaches
  // them (<= 0: one thread reads every table).  The result, and the error a bad file gives, are
  // those of a serial read (docs/run-file.md "Reading a run file").
  int64_t parallelFromRows = int64_t{1} << 18;
  // A whole-model load (none of timelineOnly, detailsOnly, statusOnly) of a file of at least
  // this many bytes reads its two halves at once, as the viewer does: the timelineOnly part on
  // the calling thread and the detailsOnly part on a second one (own connection), merged with
  // mergeDetails.  When either fails, the two did not read the same run row (a file written in
  // between), or the run is still running, the file is read again serially (one snapshot), so
  // the result and any error are a serial read's.  <= 0: always serial.
  int64_t parallelPhasesFromBytes = int64_t{64} << 20;
};

// Loads the run file at `path`.  `progress` (optional) is called with a fraction in [0, 1] from
// the calling thread as tables are read.
model::RunModel loadRun(const std::string& path, const LoadOptions& opts = {},
                        std::function<void(float)> progress = {});

// Whether two loads of one path read the same run row (schema version, run id, config hash,
// status, end time): a file replaced or finished between them differs in one of these.
bool sameRunRow(const model::RunModel& a, const model::RunModel& b);

// Moves what a detailsOnly load read (plan, gradients and gradientsNotLoaded, losses, inputs,
// the reference) into `timeline`, a timelineOnly load of the same file (sameRunRow): together
// they are the whole model a serial load gives.
void mergeDetails(model::RunModel& timeline, model::RunModel&& details);

// The payload bytes of transfer `transferId` (RunModel::transferIds); empty when the transfer
// has no payload or no such transfer exists.  Throws RunFileError like loadRun.
std::vector<uint8_t> loadTransferPayload(const std::string& path, int64_t transferId);

// The same two operations under the names the GUI uses.
struct RunReader {
  static model::RunModel load(const std::string& path, const LoadOptions& opts = {},
                              std::function<void(float)> progress = {}) {
    return loadRun(path, opts, std::move(progress));
  }
  static std::vector<uint8_t> transferPayload(const std::string& path, int64_t transferId) {
    return loadTransferPayload(path, transferId);
  }
};

}  // namespace stagescope::storage
