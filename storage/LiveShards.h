// Which shards are being written right now: a shard a live process of this machine holds open
// (a rank of a running job, started by `run` or by hand with `worker`). Read from /proc, so it
// sees writers on this host only; a shard on a shared file system written from another host
// is not seen (its run holds no lock here either).
#pragma once

#include <string>
#include <vector>

namespace stagescope::storage {

struct LiveShard {
  std::string path;  // as given
  int pid = -1;      // a process that has it open
};

// The shards of `paths` that a live process other than this one has open, in the order given.
std::vector<LiveShard> liveShards(const std::vector<std::string>& paths);

// "being written by pid P on host H"
std::string describeWriter(const LiveShard& s);

}  // namespace stagescope::storage
