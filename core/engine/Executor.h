// Runs this rank's plan (core/plan/Plan.h) for every iteration: forward and backward of its
// stage, the communication actions through the Communicator, the data-parallel reduction and
// the optimizer step, recording each action with its times.
//
// Loss normalisation: each microbatch loss is divided by m and multiplied by the constant
// loss scale once, on the global last stage only; every module's gradients are SUMMED over
// its DP group and divided by the language model's DP size (not its own: reference §7.1),
// then unscaled, so the final gradients are those of the mean loss over the global batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
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

class Executor {
 public:
  Executor(const plan::RunConfig& config, const plan::Topology& topology, const plan::Plan& plan,
           int rank, ProcessGroups& groups, events::Recorder& recorder, at::Device device);
  ~Executor();

  IterationResult runIteration(int iteration);
  StageModel& model() { return *model_; }
  WaitState& waitState() { return wait_; }

 private:
  void forward(int iteration, const plan::Action& a);
  void backward(int iteration, const plan::Action& a);
  void communicate(int iteration, int seq, const plan::Action& a);
  void reduceGradients(int iteration);
  void optimizerStep(int iteration);
  StageInput dataFor(int iteration, int microbatch) const;
  void recordGradients(int iteration, int microbatch, events::GradPhase phase);
  void recordInput(int iteration, int microbatch, const StageInput& in);
  bool recording(int iteration) const;

  const plan::RunConfig& config_;
  const plan::Topology& topology_;
  const plan::RankPlan& me_;
  int rank_;
  ProcessGroups& groups_;
  events::Recorder& recorder_;
  at::Device device_;
  WaitState wait_;
  std::unique_ptr<FaultInjector> faults_;
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<Group> dpGroup_;
  bool prepost_ = true;  // post the next action's receives before each F/B

  // Per-microbatch state of the current iteration.
  std::map<int, std::map<std::string, at::Tensor>> received_;    // inputs from RF
  std::map<int, std::map<std::string, at::Tensor>> inputs_;      // leaves used by F
  std::map<int, at::Tensor> outputs_;                            // F outputs (loss at the end)
  std::map<int, at::Tensor> outputGrads_;                        // from RB
  std::map<int, std::map<std::string, at::Tensor>> inputGrads_;  // from B, for SB
  std::vector<double> losses_;
};

}  // namespace stagescope::engine
