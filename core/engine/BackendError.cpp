#include "core/engine/BackendError.h"

#include <c10/util/Exception.h>

namespace stagescope::engine {
namespace {

constexpr size_t kMaxReasonBytes = 200;

// Drops a leading "[path/to/file.cc:123] " (Gloo's enforce messages).
std::string withoutSourceLocation(std::string s) {
  if (s.empty() || s.front() != '[') return s;
  const size_t close = s.find("] ");
  if (close == std::string::npos) return s;
  const std::string inside = s.substr(1, close - 1);
  const size_t colon = inside.rfind(':');
  const bool location = colon != std::string::npos && inside.find('/') != std::string::npos &&
                        inside.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  return location ? s.substr(close + 2) : s;
}

}  // namespace

std::string backendReason(const std::string& what) {
  std::string m = withoutSourceLocation(what.substr(0, what.find('\n')));
  if (m.size() > kMaxReasonBytes) m = m.substr(0, kMaxReasonBytes);
  return m;
}

std::string backendReason(const std::exception& e) {
  const auto* torchError = dynamic_cast<const c10::Error*>(&e);
  return backendReason(torchError ? torchError->what_without_backtrace() : std::string(e.what()));
}

}  // namespace stagescope::engine
