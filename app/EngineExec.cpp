#include "app/EngineExec.h"

#ifdef STAGESCOPE_HAVE_ENGINE
#include <torch/version.h>  // the macro TORCH_VERSION only: nothing of LibTorch is linked
#endif
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "app/ErrorBoundary.h"

namespace stagescope::app {

std::string enginePath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  // Without /proc (never seen on Linux) the engine is looked for in the working directory.
  return (ec ? std::filesystem::path(kEngineFileName) : self.parent_path() / kEngineFileName)
      .string();
}

void execEngine(const std::string& command, char** argv) {
  const std::string path = enginePath();
  ::execv(path.c_str(), argv);
  const int err = errno;
  const std::string needs = "`stagescope " + command + "` needs the engine, " + path;
#ifndef STAGESCOPE_HAVE_ENGINE
  if (err == ENOENT) {
    throw UsageError(needs +
                     ", which this build leaves out (STAGESCOPE_WITH_TORCH=OFF); use a build "
                     "with LibTorch");
  }
#endif
  if (err == ENOENT) {
    throw UsageError(needs + ", which is missing; expected the " + kEngineFileName +
                     " executable built with this stagescope next to it (cmake --build BUILD "
                     "--target " +
                     kEngineFileName + ")");
  }
  throw UsageError(needs + ", which cannot be started: " + std::strerror(err) +
                   "; expected an executable file");
}

std::string engineTorchLine() {
#ifdef STAGESCOPE_HAVE_ENGINE
  const std::string path = enginePath();
  if (::access(path.c_str(), X_OK) != 0) {
    const bool exists = ::access(path.c_str(), F_OK) == 0;
    return std::string("LibTorch ") + TORCH_VERSION + " expected in " + path + ", which " +
           (exists ? "is not executable" : "is missing") + ": run and worker unavailable";
  }
  return std::string("LibTorch ") + TORCH_VERSION + " (in " + kEngineFileName +
         ", for run and worker)";
#else
  return "LibTorch: none (built without the engine; run and worker unavailable)";
#endif
}

}  // namespace stagescope::app
