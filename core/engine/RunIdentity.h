// Run identity: what every rank of one run must agree on before any group is built — the run
// id, the canonical config (and its hash), the run-file format version and the stagescope and
// torch versions.  This file holds the torch-free part: the record, its text encoding for the
// store, and the one-line verdict over all ranks.  Rendezvous.h exchanges it.
#pragma once

#include <string>
#include <vector>

#include "core/plan/ConfigFields.h"

namespace stagescope::engine {

// The version of stagescope written into run files and compared at rendezvous.
inline constexpr const char* kStagescopeVersion = "0.1.0";

struct RunIdentity {
  std::string runId;       // see runIdFor()
  std::string configHash;  // plan::configHash of the config
  int formatVersion = 0;   // the run-file format this build writes (PRAGMA user_version)
  std::string stagescopeVersion;
  std::string torchVersion;
  std::vector<plan::ConfigField> config;  // plan::canonicalFields
  // Where the rank runs; not compared, but checked by addressProblem.
  std::string host;         // host name
  std::string glooAddress;  // GlooAddress::describe() of what it advertises to Gloo peers
  bool glooLoopback = false;
};

// The run id of a rank writing next to run file `out`: STAGESCOPE_RUN_ID when set (our
// launcher sets it to the run file's run id); otherwise the run file's name without its
// extension, followed by "@<launch id>" when a launcher names the launch
// (TORCHELASTIC_RUN_ID other than torchrun's default "none"; SLURM_JOB_ID[.SLURM_STEP_ID]).
std::string runIdFor(const std::string& out);

// Text form for the store: one "key\tvalue" line per field (values hold no tab or newline).
std::string encodeIdentity(const RunIdentity& id);
// Inverse of encodeIdentity; unknown keys are ignored (a newer peer), so a difference is
// reported as a differing field rather than a parse error.
RunIdentity decodeIdentity(const std::string& text);

// "" when every rank's identity is equal.  Otherwise one line naming each differing field and
// which ranks hold which value, e.g.
//   "ranks run different configs: seed = 1234 on ranks 0-1, 99 on rank 2"
// Run id and versions are reported as "ranks belong to different runs" / "ranks run
// different builds".  byRank[r] is rank r's identity.
std::string identityMismatch(const std::vector<RunIdentity>& byRank);

// "" unless a rank advertises a loopback address to Gloo while other ranks run on other hosts
// (another host name) or advertise a non-loopback address: peers could never connect to it.
// Otherwise one line naming the rank, its address and what to set.
std::string addressProblem(const std::vector<RunIdentity>& byRank);

}  // namespace stagescope::engine
