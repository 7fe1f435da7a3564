// The compute floor of one pipeline stage, measured in one process (issue 16, "Engine"): CPU
// time of one forward + backward of a middle llm stage (the engine's StageModel, the model the
// ranks run), how many LibTorch operator calls that is, and what one trivial operator call
// costs on this machine, with and without autograd recording.  No communication, no threads.
//
//   bench_stage CONFIG [--set key=value ...] [--stage S] [--reps N]
//
// Prints one line per figure ("name value unit"); run_bench.py part 1 reads them.  Times are
// the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), medians over N repetitions.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "core/engine/StageModel.h"
#include "core/plan/Config.h"

namespace {

using stagescope::engine::StageInput;
using stagescope::engine::StageModel;

double threadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Operator calls seen by the dispatcher on this thread (RecordFunction, scopes FUNCTION and
// BACKWARD_FUNCTION), counted while `counting` is set.
bool counting = false;
long long opCalls = 0;

template <class F>
double cpuUsPerCall(int reps, int inner, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = threadCpuUs();
    for (int i = 0; i < inner; ++i) f();
    t.push_back((threadCpuUs() - t0) / inner);
  }
  return median(t);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_stage CONFIG [--set key=value ...] [--stage S] [--reps N]\n");
    return 2;
  }
  std::vector<std::string> sets;
  int stage = 1, reps = 200;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--set") {
      sets.push_back(argv[i + 1]);
    } else if (flag == "--stage") {
      stage = std::stoi(argv[i + 1]);
    } else if (flag == "--reps") {
      reps = std::stoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_stage: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  at::set_num_threads(1);  // as every rank runs
  const auto config = stagescope::plan::loadConfig(argv[1], sets);
  const auto& llm = config.llm();
  if (stage < 0 || stage >= llm.pp) {
    std::fprintf(stderr, "bench_stage: --stage %d outside the llm's pp %d\n", stage, llm.pp);
    return 2;
  }
  StageModel model(config, llm, stage, 0, nullptr, std::chrono::milliseconds(0), at::kCPU);
  int64_t seq = llm.textLen;
  for (const auto* enc : config.encoders()) seq += enc->patches;
  const int64_t batch = config.microBatchSize;
  at::manual_seed(1);
  const at::Tensor hidden = at::randn({seq, batch, llm.hidden});
  const at::Tensor outGrad = at::randn({seq, batch, llm.hidden});
  at::Tensor tokens =
      at::randint(0, llm.vocab, {batch, llm.textLen + 1}, at::TensorOptions().dtype(at::kLong));
  auto step = [&] {
    StageInput in;
    in.hidden = hidden.detach().requires_grad_(true);
    in.tokens = tokens;
    at::Tensor out = model.forward(in);
    if (model.computesLoss()) {
      out.backward();
    } else {
      torch::autograd::backward({out}, {outGrad});
    }
  };
  for (int i = 0; i < 20; ++i) step();  // warm-up: allocator, kernels' first calls

  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&)
                                     -> std::unique_ptr<at::ObserverContext> {
        if (counting) ++opCalls;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  counting = true;
  step();
  counting = false;
  at::removeCallback(handle);
  const long long opsPerStep = opCalls;

  const double stepUs = cpuUsPerCall(reps, 1, step);
  const at::Tensor a = at::randn({seq, batch, llm.hidden}), b = at::randn({seq, batch, llm.hidden});
  const at::Tensor ag = a.detach().requires_grad_(true);
  const double addUs = cpuUsPerCall(reps, 200, [&] { (void)at::add(a, b); });
  const double addGradUs = cpuUsPerCall(reps, 200, [&] { (void)at::add(ag, b); });
  std::printf("stage %d of pp %d, layers %d, hidden %d, seq %lld, batch %lld\n", stage, llm.pp,
              llm.layersOfStage(stage), llm.hidden, static_cast<long long>(seq),
              static_cast<long long>(batch));
  std::printf("forward_backward_cpu_us %.1f\n", stepUs);
  std::printf("operator_calls_per_forward_backward %lld\n", opsPerStep);
  std::printf("cpu_us_per_operator_call %.2f\n", opsPerStep > 0 ? stepUs / opsPerStep : 0.0);
  std::printf("trivial_add_cpu_us %.2f\n", addUs);
  std::printf("trivial_add_with_autograd_cpu_us %.2f\n", addGradUs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_stage: %s\n", e.what());
    return 1;
  }
}
