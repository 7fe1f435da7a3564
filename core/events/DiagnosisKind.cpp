#include "core/events/DiagnosisKind.h"

#include <array>

namespace stagescope::events {
namespace {

// Indexed by the enumerator; the texts are the run file's (docs/run-file.md), never renamed.
constexpr std::array<const char*, kDiagnosisKinds> kNames = {"",
                                                             "hang",
                                                             "timeout",
                                                             "error",
                                                             "config_mismatch",
                                                             "network",
                                                             "peer_lost",
                                                             "peer_dead",
                                                             "op_failed",
                                                             "late_completion",
                                                             "fault_injected",
                                                             "corrupt_transfer",
                                                             "rank_failed",
                                                             "rank_end",
                                                             "rank_exited",
                                                             "rank_killed",
                                                             "rank_stopped",
                                                             "clock"};

}  // namespace

const char* toString(DiagnosisKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kNames.size() ? kNames[i] : "";
}

bool parseDiagnosisKind(std::string_view text, DiagnosisKind* out) {
  for (size_t i = 1; i < kNames.size(); ++i) {
    if (text == kNames[i]) {
      *out = static_cast<DiagnosisKind>(i);
      return true;
    }
  }
  *out = DiagnosisKind::Other;
  return false;
}

}  // namespace stagescope::events
