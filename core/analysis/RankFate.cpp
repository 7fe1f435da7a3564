#include "core/analysis/RankFate.h"

namespace stagescope::analysis {

using events::DiagnosisKind;

const char* toString(RankFate fate) {
  switch (fate) {
    case RankFate::Completed:
      return "completed";
    case RankFate::Unfinished:
      return "unfinished";
    case RankFate::Hung:
      return "hung";
    case RankFate::Failed:
      return "failed";
    case RankFate::Killed:
      return "killed";
    case RankFate::Stopped:
      return "stopped";
    case RankFate::PeerLost:
      return "peer lost";
  }
  return "?";
}

std::optional<RankFate> fateOf(DiagnosisKind kind) {
  switch (kind) {
    case DiagnosisKind::Timeout:
      return RankFate::Hung;
    case DiagnosisKind::Error:
    case DiagnosisKind::ConfigMismatch:
    case DiagnosisKind::Network:
    case DiagnosisKind::OpFailed:
    case DiagnosisKind::RankExited:
    case DiagnosisKind::RankFailed:
      return RankFate::Failed;
    case DiagnosisKind::RankKilled:
      return RankFate::Killed;
    case DiagnosisKind::RankStopped:
      return RankFate::Stopped;
    case DiagnosisKind::PeerLost:
      return RankFate::PeerLost;
    default:
      return std::nullopt;
  }
}

int strength(RankFate fate) {
  switch (fate) {
    case RankFate::Killed:
      return 4;
    case RankFate::Failed:
      return 3;
    case RankFate::Hung:
      return 2;
    case RankFate::PeerLost:
      return 1;
    case RankFate::Stopped:
      return 0;
    default:
      return -1;
  }
}

const events::DiagnosisRecord* decidingRecord(const std::vector<events::DiagnosisRecord>& records,
                                              int rank) {
  const events::DiagnosisRecord* best = nullptr;
  int bestStrength = -1;
  for (const auto& d : records) {
    if (d.rank != rank) continue;
    const std::optional<RankFate> fate = fateOf(d.kind);
    if (fate && strength(*fate) > bestStrength) best = &d, bestStrength = strength(*fate);
  }
  return best;
}

bool endsTheProcess(DiagnosisKind kind) {
  return kind == DiagnosisKind::RankFailed || kind == DiagnosisKind::RankExited ||
         kind == DiagnosisKind::RankKilled || kind == DiagnosisKind::RankStopped;
}

std::string rankSays(const events::DiagnosisRecord& d) {
  return "rank " + std::to_string(d.rank) + (endsTheProcess(d.kind) ? " " : ": ") + d.message;
}

std::optional<events::RunStatus> statusOfFailedOperation(DiagnosisKind kind) {
  const std::optional<RankFate> fate = fateOf(kind);
  if (!fate || endsTheProcess(kind)) return std::nullopt;
  return *fate == RankFate::Hung ? events::RunStatus::Hung : events::RunStatus::Failed;
}

}  // namespace stagescope::analysis
