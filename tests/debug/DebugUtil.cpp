#include "tests/debug/DebugUtil.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "tests/engine/RunHarness.h"

namespace stagescope::testing {

std::string debugConfig(const std::string& name) {
  return std::string(STAGESCOPE_SOURCE_DIR) + "/tests/debug/configs/" + name + ".toml";
}

std::filesystem::file_time_type builtAt(const std::string& exe) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_time_type front = fs::last_write_time(exe, ec);
  const fs::path real = fs::canonical(exe, ec);
  const fs::file_time_type engine =
      ec ? front : fs::last_write_time(real.parent_path() / "stagescope-engine", ec);
  return ec ? front : std::max(front, engine);
}

CliResult runCli(const std::vector<std::string>& args, int timeoutSeconds) {
  return runCliWith(stagescopeExe(), args, timeoutSeconds);
}

CliResult runCliWith(const std::string& exe, const std::vector<std::string>& args,
                     int timeoutSeconds) {
  CliResult r;
  std::string cmd = "timeout -s KILL " + std::to_string(timeoutSeconds) + " '" + exe + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace stagescope::testing
