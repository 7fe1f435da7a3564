// The `stagescope_torch._C` Python extension: the recording backend class and the session
// functions behind the small Python API in stagescope_torch/__init__.py.
//
// Built against the torch wheel's pybind11 and libtorch_python, so c10d types (Backend,
// Store, Work) are shared with `torch.distributed`: torch.distributed must be imported before
// this module (the package's __init__ does).
#include <ATen/ATen.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <cmath>
#include <stdexcept>

#include "app/capture/CaptureSession.h"
#include "app/capture/RecordingBackend.h"
#include "core/engine/TensorDigest.h"
#include "storage/Schema.h"

namespace py = pybind11;
using stagescope::capture::CaptureConfig;
using stagescope::capture::CaptureSession;
using stagescope::capture::RecordingBackend;
namespace events = stagescope::events;

namespace {

void configure(const std::string& run, const std::string& level, const std::string& runId,
               const std::string& hangTimeout) {
  CaptureConfig cfg;
  cfg.runPath = run;
  if (run.empty()) throw std::invalid_argument("configure(run=...): the run file path is empty");
  if (!events::parseRecordLevel(level, &cfg.level)) {
    throw std::invalid_argument("configure(level='" + level +
                                "'): expected one of off, meta, stats, full");
  }
  cfg.runId = runId;
  if (!hangTimeout.empty()) {
    cfg.hangTimeout = stagescope::capture::parseHangTimeout(hangTimeout, "hang_timeout");
  }
  CaptureSession::instance().configure(std::move(cfg));
}

// One parameter's gradient (or value) of this rank, recorded per the session's level.
void recordGradient(const std::string& param, const at::Tensor& tensor, const std::string& phase,
                    const std::string& module, int microbatch, int tp, int pp, int dp) {
  auto& session = CaptureSession::instance();
  const auto level = session.level();
  if (level == events::RecordLevel::Off) return;
  events::GradientRecord g;
  if (!stagescope::storage::parseGradPhase(phase, &g.phase)) {
    throw std::invalid_argument("record_gradients(phase='" + phase +
                                "'): expected accumulated, reduced or param_after_step");
  }
  g.rank = session.rank();
  g.iteration = session.iteration();
  g.microbatch = microbatch;
  g.param = param;
  g.module = module;
  g.tp = tp;
  g.pp = pp;
  g.dp = dp;
  g.shape = stagescope::engine::shapeOf(tensor);
  g.fullShape = g.shape;
  g.dtype = stagescope::engine::dtypeName(tensor);
  if (level >= events::RecordLevel::Stats) {
    at::Tensor t = tensor.detach();
    g.norm = t.to(at::kDouble).norm().item<double>();
    auto d = stagescope::engine::digest(t);
    g.checksum = d.checksum;
    g.hasStats = true;
    g.stats = d.stats;
    if (level >= events::RecordLevel::Full) g.payload = stagescope::engine::hostBytes(t);
  }
  session.recorder().gradient(std::move(g));
}

// One loss of the current iteration (microbatch -1: the iteration's mean), as a last stage
// computed it; `dp` the data-parallel replica that computed it.  Recorded at every level but off.
void recordLoss(double value, int microbatch, int dp) {
  auto& session = CaptureSession::instance();
  if (session.level() == events::RecordLevel::Off) return;
  if (microbatch < -1 || dp < 0)
    throw std::invalid_argument("record_loss(microbatch=" + std::to_string(microbatch) + ", dp=" +
                                std::to_string(dp) + "): expected microbatch >= -1 and dp >= 0");
  events::LossRecord l;
  l.rank = session.rank();
  l.iteration = session.iteration();
  l.microbatch = microbatch;
  l.dp = dp;
  l.loss = value;
  session.recorder().loss(l);
}

// One module replica's reduction or loss-scale facts of the current iteration
// (core/events/ModuleStep.h): what stagescope_torch.megatron's audited_finalize and
// audited_step know.  Unknown values: normalisation "", counts -1, scales NaN, flags -1.
void recordModuleStep(const std::string& module, int dp, const std::string& normalisation,
                      int microbatches, int64_t tokens, int64_t globalTokens, double lossScale,
                      double lossScaleAfter, int foundInf, int skipped) {
  events::ModuleStepRecord m;
  // Bad input is refused whether or not the job records (one line naming the argument).
  if (!normalisation.empty() && (!events::parseLossNormalisation(normalisation, &m.normalisation) ||
                                 m.normalisation == events::LossNormalisation::Unknown)) {
    throw std::invalid_argument("record_module_step(normalisation='" + normalisation +
                                "'): expected mean or per_token");
  }
  if (module.empty()) throw std::invalid_argument("record_module_step: the module name is empty");
  auto& session = CaptureSession::instance();
  if (session.level() == events::RecordLevel::Off) return;
  m.rank = session.rank();
  m.iteration = session.iteration();
  m.module = module;
  m.dp = dp;
  m.microbatches = microbatches;
  m.tokens = tokens;
  m.globalTokens = globalTokens;
  m.lossScale = lossScale;
  m.lossScaleAfter = lossScaleAfter;
  m.foundInf = static_cast<int8_t>(foundInf < 0 ? -1 : foundInf > 0 ? 1 : 0);
  m.skipped = static_cast<int8_t>(skipped < 0 ? -1 : skipped > 0 ? 1 : 0);
  session.recorder().moduleStep(std::move(m));
}

void finish(const std::string& status, const std::string& reason) {
  events::RunStatus s;
  if (!events::parseRunStatus(status, &s)) {
    throw std::invalid_argument("finish(status='" + status +
                                "'): expected completed, failed, hung or killed");
  }
  CaptureSession::instance().finish(s, reason);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "stagescope recording c10d backend (see docs/capture.md)";
  py::module_::import("torch.distributed");
  // The torch build this module was compiled against (app/capture/CMakeLists.txt): any other
  // has another libtorch ABI.  The package's __init__ says the same before loading us; this is
  // the check for an import that bypasses it.
  {
    auto version = py::module_::import("torch.version");
    const auto have = version.attr("__version__").cast<std::string>();
    const auto haveGit = version.attr("git_version").cast<std::string>();
    if (have != STAGESCOPE_TORCH_BUILT_VERSION || haveGit != STAGESCOPE_TORCH_BUILT_GIT_VERSION) {
      throw py::import_error("stagescope_torch._C was built against torch " +
                             std::string(STAGESCOPE_TORCH_BUILT_VERSION) +
                             " but this Python has torch " + have +
                             ": rebuild it (scripts/build-capture-for.sh <python>)");
    }
  }

  py::class_<RecordingBackend, c10d::Backend, c10::intrusive_ptr<RecordingBackend>>(
      m, "RecordingBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& inner,
                       std::vector<int64_t> globalRanks, std::chrono::milliseconds timeout) {
             return c10::make_intrusive<RecordingBackend>(inner, std::move(globalRanks), timeout);
           }),
           py::arg("inner"), py::arg("global_ranks"), py::arg("timeout"))
      .def_property("name", &RecordingBackend::name, &RecordingBackend::setName)
      .def_property_readonly("inner", &RecordingBackend::inner)
      .def("global_rank", &RecordingBackend::globalRank, py::arg("group_rank"));

  m.def("configure", &configure, py::arg("run"), py::arg("level") = "stats", py::arg("run_id") = "",
        py::arg("hang_timeout") = "");
  m.def("configured", [] { return CaptureSession::instance().configured(); });
  m.def(
      "set_shape_preambles", [](bool on) { CaptureSession::instance().setShapePreambles(on); },
      py::arg("on"));
  m.def(
      "declare_layout",
      [](const std::string& text) { CaptureSession::instance().declareLayout(text); },
      py::arg("config_text"));
  m.def("started", [] { return CaptureSession::instance().started(); });
  m.def("begin_batch", [] { CaptureSession::instance().beginBatch(); });
  m.def("end_batch", [] { CaptureSession::instance().endBatch(); });
  m.def("level", [] { return std::string(events::toString(CaptureSession::instance().level())); });
  m.def("rank", [] { return CaptureSession::instance().rank(); });
  m.def(
      "step", [](int i) { CaptureSession::instance().step(i); }, py::arg("iteration"));
  m.def("iteration", [] { return CaptureSession::instance().iteration(); });
  m.def("record_gradient", &recordGradient, py::arg("param"), py::arg("tensor"),
        py::arg("phase") = "reduced", py::arg("module") = "", py::arg("microbatch") = -1,
        py::arg("tp") = 0, py::arg("pp") = 0, py::arg("dp") = 0);
  m.def(
      "expect_role",
      [](uintptr_t dataPtr, const std::string& carries, bool peerIsNext, const std::string& call) {
        CaptureSession::ExpectedRole role;
        if (carries != "activation" && carries != "gradient")
          throw std::invalid_argument("expect_role(carries='" + carries +
                                      "'): expected activation or gradient");
        role.carries =
            carries == "activation" ? events::Direction::Activation : events::Direction::Gradient;
        role.peerIsNext = peerIsNext;
        role.call = call;
        CaptureSession::instance().expectRole(reinterpret_cast<const void*>(dataPtr), role);
      },
      py::arg("data_ptr"), py::arg("carries"), py::arg("peer_is_next"), py::arg("call"));
  m.def("clear_roles", [] { CaptureSession::instance().clearRoles(); });
  m.def("record_loss", &recordLoss, py::arg("value"), py::arg("microbatch") = -1,
        py::arg("dp") = 0);
  m.def("record_module_step", &recordModuleStep, py::arg("module"), py::arg("dp") = -1,
        py::arg("normalisation") = "", py::arg("microbatches") = -1, py::arg("tokens") = -1,
        py::arg("global_tokens") = -1, py::arg("loss_scale") = NAN,
        py::arg("loss_scale_after") = NAN, py::arg("found_inf") = -1, py::arg("skipped") = -1);
  m.def("finish", &finish, py::arg("status") = "completed", py::arg("reason") = "");
}
