#include "app/FaultFlag.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/events/Printable.h"

namespace stagescope::app {
namespace {

[[noreturn]] void bad(const std::string& spec, const std::string& what) {
  throw FaultFlagError(events::printableLine("--fault '" + spec + "': " + what));
}

// The integer `value` of `key`, which must lie in [lo, hi]; `why` says where the bounds come
// from.  Text that is not an integer, and integers of any size outside the range (even beyond
// 64 bits), get the same one line: the value as given and the valid range.
std::string integer(const std::string& spec, const std::string& key, const std::string& value,
                    long long lo, long long hi, const std::string& why) {
  const std::string expected = "expected an integer in " + std::to_string(lo) + ".." +
                               std::to_string(hi) + (why.empty() ? "" : " (" + why + ")");
  size_t digits = value.empty() ? 0 : (value[0] == '-' || value[0] == '+') ? 1 : 0;
  const bool syntax =
      digits < value.size() && value.find_first_not_of("0123456789", digits) == std::string::npos;
  if (!syntax) bad(spec, key + " = '" + value + "': not an integer; " + expected);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (errno == ERANGE || v < lo || v > hi) bad(spec, key + " = " + value + ": " + expected);
  return std::to_string(v);
}

std::string number(const std::string& spec, const std::string& key, const std::string& value) {
  const std::string expected =
      "expected a number of seconds in [0, " +
      std::to_string(static_cast<long long>(plan::limits::kMaxTimeoutSeconds)) +
      "] (at most 1 day)";
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  // Decimal only: strtod also reads hexadecimal ("0x10" as 16 seconds).
  if (value.empty() || *end != '\0' || value.find_first_of("xX") != std::string::npos)
    bad(spec, key + " = '" + value + "': not a number; " + expected);
  if (!(v >= 0) || v > plan::limits::kMaxTimeoutSeconds)
    bad(spec, key + " = " + value + ": " + expected);
  // Shortest text that reads back as v (std::to_string would turn 1e-7 into "0.000000").
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  std::string s = text;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // a TOML float
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

std::string faultFlagToToml(const std::string& spec, const plan::RunConfig& cfg) {
  const size_t colon = spec.find(':');
  const std::string kindText = spec.substr(0, colon);
  plan::FaultKind kind{};
  if (!plan::parseFaultKind(kindText, &kind)) {
    bad(spec, "unknown kind '" + kindText +
                  "' (expected delay, drop, corrupt, shape, nan, inf or kill before ':')");
  }
  std::string toml = "\n[[faults]]\nkind = \"" + std::string(plan::toString(kind)) + "\"\n";
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
    if (key == "iteration") {
      toml += key + " = " +
              integer(spec, key, value, 0, cfg.iterations - 1,
                      "iterations = " + std::to_string(cfg.iterations)) +
              "\n";
    } else if (key == "microbatch") {
      toml += key + " = " +
              integer(spec, key, value, 0, cfg.microbatches - 1,
                      "microbatches = " + std::to_string(cfg.microbatches)) +
              "\n";
    } else if (key == "rank") {
      toml += key + " = " +
              integer(spec, key, value, -1, cfg.worldSize - 1,
                      "-1 for none; world_size = " + std::to_string(cfg.worldSize)) +
              "\n";
    } else if (key == "stage") {
      int pp = 1;
      for (const auto& m : cfg.modules) pp = std::max(pp, m.pp);
      toml += key + " = " +
              integer(spec, key, value, -1, pp - 1,
                      "-1 for the last; the largest pp is " + std::to_string(pp)) +
              "\n";
    } else if (key == "module" || key == "direction") {
      toml += key + " = " + quoted(spec, key, value) + "\n";
    } else if (key == "delay_seconds") {
      toml += key + " = " + number(spec, key, value) + "\n";
    } else {
      bad(spec, "unknown key '" + key +
                    "' (expected iteration, microbatch, module, stage, direction, delay, rank)");
    }
  }
  using plan::FaultKind;
  if (kind == FaultKind::Delay && !seen.count("delay_seconds"))
    bad(spec, "a delay fault needs delay=SECONDS");
  if (kind != FaultKind::Kill && !seen.count("module"))
    bad(spec, "module=NAME is required (the sending module)");
  if (kind == FaultKind::Kill && !seen.count("module") && !seen.count("rank")) {
    bad(spec, "a kill fault needs rank=R or module=NAME");
  }
  return toml;
}

}  // namespace stagescope::app
