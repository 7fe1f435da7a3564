// Test harness: runs the real `stagescope` executable (all ranks as processes over Gloo) and
// reads its run file through the storage read model.  Torch-free on purpose: payloads are
// decoded as float32 here, independently of the engine.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::testing {

std::string stagescopeExe();                          // from STAGESCOPE_EXE (set by CMake)
std::string assetConfig(const std::string& name);     // assets/configs/<name>.toml
std::string sourcePath(const std::string& relative);  // <source dir>/<relative>
std::string tempRunPath(const std::string& tag);

struct RunOutput {
  int exitCode = -1;
  std::string output;  // stdout + stderr
  std::string runPath;
};

// `stagescope run CONFIG -o <tmp> -q ARGS...`, with a hard time limit.
RunOutput runStagescope(const std::string& config, const std::vector<std::string>& args,
                        const std::string& tag, int timeoutSeconds = 240);

// Float32 values of a payload.
std::vector<float> floats(const std::vector<uint8_t>& bytes);

// Full gradient per (iteration, parameter) gathered from the Reduced records of DP replica 0
// (TP shards placed by partitionDim/partitionOffset; replicated params from tp 0).
std::map<std::pair<int, std::string>, std::vector<float>> gatherReduced(const model::RunModel& run);
// The same for any phase (ParamInitial: the initial parameters at level full).
std::map<std::pair<int, std::string>, std::vector<float>> gatherPhase(const model::RunModel& run,
                                                                      events::GradPhase phase);
std::map<std::pair<int, std::string>, std::vector<float>> referenceGradients(
    const model::RunModel& run);
// Global-batch mean loss per iteration (microbatch -1 records) of the ranks (rank >= 0) or
// of the reference (rank -1).
std::map<int, double> iterationLosses(const model::RunModel& run, bool reference);

double l2norm(const std::vector<float>& v);
double relativeError(const std::vector<float>& got, const std::vector<float>& want);

// The differential rule (gtest expectations): per iteration, the loss of `run` within 1e-6
// relative of `want`'s, and every parameter's final (DP-reduced, TP-gathered) gradient within
// ||g - g_want|| / ||g_want|| <= 1e-5 (parameters whose wanted gradient has norm < 1e-6, e.g.
// the attention key bias whose true gradient is zero, within 1e-5 absolute).  Both runs must be
// recorded at level full.  `reference`: compare with the run's own single-process reference
// (`run --reference`); otherwise with the ranks of `other` (another layout of the same model).
void expectSameMaths(const model::RunModel& run, const model::RunModel& other, bool reference,
                     const std::string& what);

}  // namespace stagescope::testing
