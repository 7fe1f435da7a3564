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
                    const std::string& module, int microbatch) {
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
        py::arg("phase") = "reduced", py::arg("module") = "", py::arg("microbatch") = -1);
  m.def("finish", &finish, py::arg("status") = "completed", py::arg("reason") = "");
}
