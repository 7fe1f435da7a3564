// stagescope-engine: the commands that need LibTorch, `run` and `worker`.  Users type
// `stagescope run ...`; the front (app/main.cpp) execs this executable with the same argv
// (app/EngineExec.h), and `run` starts its exec'd ranks (CUDA) with this executable too.
#include <torch/version.h>

#include <cstdio>

#include "app/CommandLine.h"
#include "app/Commands.h"
#include "app/ErrorBoundary.h"
#include "core/analysis/Check.h"

namespace {

using namespace stagescope::app;

int engineMain(int argc, char** argv) {
  const auto cli = newCommandLine(versionText("LibTorch " TORCH_VERSION));
  RunOptions run;
  WorkerOptions worker;
  CLI::App* runCmd = addRunCommand(*cli, run);
  CLI::App* workerCmd = addWorkerCommand(*cli, worker);
  if (const auto done = parseCommandLine(*cli, argc, argv)) return *done;
  if (*runCmd) return runCommand(run);
  if (*workerCmd) return workerCommand(worker);
  return stagescope::analysis::exit_code::kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  installLastResorts();
  return guarded([&] { return engineMain(argc, argv); });
}
