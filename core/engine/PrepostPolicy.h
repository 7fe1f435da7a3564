// Whether a rank posts the next action's receives before the forward/backward that precedes
// it (Communicator::prepostRecvs).  Pre-posting changes when a receive is posted, never what
// arrives, so the choice is about speed only:
//   - with a core per rank (or an accelerator doing the compute), the peer's message lands
//     while this rank computes, and the receive costs nothing when its action starts;
//   - with more ranks than cores on one host, the early receive wakes Gloo's loop thread in the
//     middle of another rank's compute on a shared core: measured 7-9 % slower on the
//     benchmark's small model (4 ranks, 2 cores, three days), and no faster on the large one.
// STAGESCOPE_PREPOST = 1 (always), 0 (never) or auto (the default: the rule above) decides.
#pragma once

#include <optional>
#include <string>

namespace stagescope::engine {

struct PrepostInputs {
  std::optional<std::string> setting;  // STAGESCOPE_PREPOST, when set
  int ranksOnHost = 1;                 // processes of this job sharing this host's cores
  int cores = 1;                       // cores this process may run on
  bool accelerator = false;            // the compute runs on a GPU, not on those cores
};

// The decision.  Throws std::runtime_error naming STAGESCOPE_PREPOST, its value and the
// accepted ones when the setting is none of 1, 0, auto.
bool prepostReceives(const PrepostInputs& in);

// The cores this process may run on (its CPU affinity mask; 1 when it cannot be read).
int usableCores();

}  // namespace stagescope::engine
