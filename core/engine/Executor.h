// Runs this rank's plan (core/plan/Plan.h) for every iteration: forward and backward of its
// stage, the communication actions through the Communicator, the data-parallel reduction and
// the optimizer step, recording each action with its times.
//
// Loss normalisation: each microbatch loss is divided by m and multiplied by the constant
// loss scale once, on the global last stage only; every module's gradients are SUMMED over
// its DP group and divided by the language model's DP size (not its own: schedule.md §7.1),
// then unscaled, so the final gradients are those of the mean loss over the global batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/engine/Communicator.h"
#include "core/engine/Faults.h"
#include "core/engine/ProcessGroups.h"
#include "core/engine/StageModel.h"
#include "core/events/Recorder.h"
#include "core/plan/Plan.h"

namespace torch::optim {
class Optimizer;
}

namespace stagescope::engine {

struct IterationResult {
  int iteration = 0;
  double loss = 0;  // global-batch mean loss (valid on last-stage ranks)
  bool hasLoss = false;
  double seconds = 0;  // wall time of the iteration on this rank
};

// A rank holding several stages (colocated modules, core/plan/Colocation.h) runs one Unit per
// stage: its own StageModel, optimizer, DP group, fault injector and per-microbatch state;
// every action of the plan names the module whose unit executes it.  Each module's gradients
// are reduced over that module's DP group and recorded under its name.
class Executor {
 public:
  Executor(const plan::RunConfig& config, const plan::Topology& topology, const plan::Plan& plan,
           int rank, ProcessGroups& groups, events::Recorder& recorder, at::Device device,
           bool prepostReceives);
  ~Executor();

  IterationResult runIteration(int iteration);
  // The stage model of `module` on this rank (the first stage's when empty).
  StageModel& model(const std::string& module = "");
  WaitState& waitState() { return wait_; }

 private:
  struct Unit;
  Unit& unit(const std::string& module);
  void forward(int iteration, const plan::Action& a);
  void backward(int iteration, const plan::Action& a);
  void communicate(int iteration, int seq, const plan::Action& a);
  void reduceGradients(int iteration, Unit& u);
  void optimizerStep(int iteration, Unit& u);
  StageInput dataFor(const Unit& u, int iteration, int microbatch) const;
  void recordGradients(const Unit& u, int iteration, int microbatch, events::GradPhase phase);
  void recordInput(const Unit& u, int iteration, int microbatch, const StageInput& in);
  // Whether this rank records `iteration` (level above off, and the [record] filter keeps it).
  bool recording(int iteration) const;

  const plan::RunConfig& config_;
  const plan::Topology& topology_;
  const plan::RankPlan& me_;
  int rank_;
  ProcessGroups& groups_;
  events::Recorder& recorder_;
  at::Device device_;
  WaitState wait_;
  std::vector<std::unique_ptr<Unit>> units_;  // me_.stages order
  std::unique_ptr<Communicator> comm_;
  bool prepost_ = true;  // post the next action's receives before each F/B (PrepostPolicy.h)
  std::vector<double> losses_;
  std::shared_ptr<Group> lossDpGroup_;  // the llm's DP group on its last stage
  std::set<int> lastGradientSend_;      // seqs (see the constructor)
};

}  // namespace stagescope::engine
