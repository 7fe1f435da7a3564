#include "app/FaultFlag.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace stagescope::app {
namespace {

const std::set<std::string> kKinds = {"delay", "drop", "corrupt", "shape", "nan", "inf", "kill"};

[[noreturn]] void bad(const std::string& spec, const std::string& what) {
  throw FaultFlagError("--fault '" + spec + "': " + what);
}

std::string integer(const std::string& spec, const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < -1000000 || v > 1000000) {
    bad(spec, key + " = '" + value + "': expected an integer");
  }
  return std::to_string(v);
}

std::string number(const std::string& spec, const std::string& key, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0) || v > 1e6) {
    bad(spec, key + " = '" + value + "': expected a number of seconds >= 0");
  }
  std::string s = std::to_string(v);
  return s;
}

std::string quoted(const std::string& spec, const std::string& key, const std::string& value) {
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      bad(spec, key + " = '" + value + "': expected a name (letters, digits, '_', '-')");
    }
  }
  return "\"" + value + "\"";
}

}  // namespace

std::string faultFlagToToml(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (!kKinds.count(kind)) {
    bad(spec, "unknown kind '" + kind +
                  "' (expected delay, drop, corrupt, shape, nan, inf or kill before ':')");
  }
  std::string toml = "\n[[faults]]\nkind = \"" + kind + "\"\n";
  std::set<std::string> seen;
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size() && !rest.empty()) {
    size_t comma = rest.find(',', pos);
    const std::string item =
        rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? rest.size() + 1 : comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) bad(spec, "'" + item + "': expected key=value");
    std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (key == "delay") key = "delay_seconds";
    if (!seen.insert(key).second) bad(spec, "'" + key + "' given twice");
    if (key == "iteration" || key == "microbatch" || key == "stage" || key == "rank") {
      toml += key + " = " + integer(spec, key, value) + "\n";
    } else if (key == "module" || key == "direction") {
      toml += key + " = " + quoted(spec, key, value) + "\n";
    } else if (key == "delay_seconds") {
      toml += key + " = " + number(spec, key, value) + "\n";
    } else {
      bad(spec, "unknown key '" + key +
                    "' (expected iteration, microbatch, module, stage, direction, delay, rank)");
    }
  }
  if (kind == "delay" && !seen.count("delay_seconds"))
    bad(spec, "a delay fault needs delay=SECONDS");
  if (kind != "kill" && !seen.count("module"))
    bad(spec, "module=NAME is required (the sending module)");
  if (kind == "kill" && !seen.count("module") && !seen.count("rank")) {
    bad(spec, "a kill fault needs rank=R or module=NAME");
  }
  return toml;
}

}  // namespace stagescope::app
