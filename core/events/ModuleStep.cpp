#include "core/events/ModuleStep.h"

namespace stagescope::events {

const char* toString(LossNormalisation n) {
  switch (n) {
    case LossNormalisation::Mean:
      return "mean";
    case LossNormalisation::PerToken:
      return "per_token";
    case LossNormalisation::Unknown:
      break;
  }
  return "unknown";
}

bool parseLossNormalisation(const std::string& text, LossNormalisation* out) {
  for (auto n :
       {LossNormalisation::Unknown, LossNormalisation::Mean, LossNormalisation::PerToken}) {
    if (text == toString(n)) {
      *out = n;
      return true;
    }
  }
  return false;
}

}  // namespace stagescope::events
