// c10d process groups over a shared store: one Gloo (or NCCL) backend per rank list this
// rank belongs to, each isolated by a PrefixStore derived from the list, like Python's
// new_group().  Groups of one rank have no backend; their collectives are no-ops.
//
// Contract: every member of a rank list must call get() for it in the same relative order
// as the other members (Gloo connects the members at construction); createModuleGroups()
// walks a fixed global order on every rank, so this holds for all groups it creates.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/engine/GlooAddress.h"

namespace stagescope::engine {

enum class BackendKind { Gloo, Nccl };

struct Group {
  std::string name;                           // "llm/tp/4-5", for messages
  std::vector<int> ranks;                     // ascending global ranks
  c10::intrusive_ptr<c10d::Backend> backend;  // null when ranks.size() == 1
  int localRank(int globalRank) const;        // index in ranks; throws if absent
  int size() const { return static_cast<int>(ranks.size()); }
};

class ProcessGroups {
 public:
  ProcessGroups(c10::intrusive_ptr<c10d::Store> store, int rank, int worldSize, BackendKind backend,
                std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  BackendKind backendKind() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The address Gloo backends advertise to peers (before the first get()).  Default:
  // STAGESCOPE_GLOO_HOST, else 127.0.0.1 (one host); workers pass chooseGlooAddress().
  void setGlooAddress(GlooAddress address) { gloo_ = std::move(address); }

  // The group over exactly `ranks` (sorted internally); created on first use, shared after
  // (identical lists share one backend: the reference's broadcast-PG cache).  Returns null
  // when this rank is not in `ranks`.
  std::shared_ptr<Group> get(std::vector<int> ranks, const std::string& purpose);

 private:
  c10::intrusive_ptr<c10d::Backend> makeBackend(const std::vector<int>& ranks, int localRank);
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int worldSize_;
  BackendKind backend_;
  std::chrono::milliseconds timeout_;
  GlooAddress gloo_;
  std::map<std::vector<int>, std::shared_ptr<Group>> groups_;
};

// The store could not be reached or did not answer within the timeout; what() is one line.
class StoreTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Connects to (or, when `isServer`, hosts) the rendezvous TCPStore.  Bounded: returns within
// `timeout` (+1 s) or throws StoreTimeout naming the address.
c10::intrusive_ptr<c10d::Store> connectStore(const std::string& host, int port, bool isServer,
                                             int worldSize, std::chrono::milliseconds timeout);

}  // namespace stagescope::engine
