#include "core/events/FaultPhrase.h"

#include <cstdio>
#include <cstdlib>

namespace stagescope::events {
namespace {

constexpr std::string_view kDelay = "delay";

}  // namespace

std::string faultPhrase(const InjectedFaultRecord& fault) {
  std::string phrase;
  for (const auto& k : fault.kinds) {
    phrase += (phrase.empty() ? "" : ",") + k;
    if (k == kDelay) {
      char seconds[32];  // "10 s", "0.5 s": as the config gave it
      std::snprintf(seconds, sizeof seconds, " %g s", fault.delaySeconds);
      phrase += seconds;
    }
  }
  return phrase;
}

std::vector<std::string> splitFaultKinds(std::string_view text) {
  std::vector<std::string> kinds;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    kinds.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return kinds;
}

void readFaultPhrase(std::string_view phrase, InjectedFaultRecord* fault) {
  for (std::string k : splitFaultKinds(phrase)) {
    if (k.size() > kDelay.size() && k.compare(0, kDelay.size() + 1, "delay ") == 0) {
      fault->delaySeconds = std::strtod(k.c_str() + kDelay.size() + 1, nullptr);
      k = kDelay;
    }
    fault->kinds.push_back(std::move(k));
  }
}

}  // namespace stagescope::events
