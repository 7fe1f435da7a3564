// Which process a rank is, and whether that process still exists, as far as this machine can
// tell.  A pid means something only inside one PID namespace of one boot of one machine, so a
// process is named by (machine, pid, start time): `machine` is the host name, the kernel's boot
// id and the PID namespace; the start time (clock ticks after boot, /proc/<pid>/stat field 22)
// tells a recycled pid from the original process.  Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace stagescope::engine {

struct ProcessIdentity {
  std::string host;         // gethostname(): what users call the machine
  int pid = 0;              // getpid()
  uint64_t startTicks = 0;  // /proc/<pid>/stat field 22 (0 when unreadable)
  std::string machine;  // "<host>|<boot id>|<pid namespace>": equal only where pid is meaningful

  static ProcessIdentity self();
  // One line without spaces in the fields but `host` (encoded last): "pid ticks machine host".
  std::string encode() const;
  static std::optional<ProcessIdentity> decode(const std::string& text);
};

// What this machine knows of a process.  `Elsewhere`: another machine (or PID namespace), so
// nothing can be said from /proc.
enum class ProcessState { Running, Exited, Gone, Elsewhere };

struct ProcessStatus {
  ProcessState state = ProcessState::Elsewhere;
  // Exited: the process ended and its parent has not collected it yet (a zombie), whose wait
  // status /proc still holds: the signal that killed it (0 if it exited) or its exit code.
  int signal = 0;
  int exitCode = 0;
};

// Looks up `p` in /proc when it ran on this machine (same `machine`), else Elsewhere.  A pid
// that now belongs to another process (other start time) is Gone.
ProcessStatus processStatus(const ProcessIdentity& p);

// "SIGKILL" for 9 (the conventional name; "signal N" for one without).
std::string signalName(int signal);

}  // namespace stagescope::engine
