// RecordingBackend: the `stagescope` c10d backend.  It wraps an inner backend (Gloo on CPU)
// that was created on the same store with the same group rank and size, forwards every
// operation to it unchanged (same tensors, same options, same order, the inner Work's
// results), and records each operation through the process's CaptureSession:
//   * send / recv (isend / irecv / batch_isend_irecv arrive here one op at a time) as one
//     transfer row each (side, global and group ranks, edge, shape, dtype, bytes, checksum,
//     statistics, payload per level) plus one action row (SF/RF for messages that go up the
//     group's rank order, SB/RB for those that go down);
//   * collectives (all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier,
//     reduce, gather, scatter, and their coalesced/base forms) as one collective row each.
// Times: start = when the job posted the op, end = when its Work was seen complete (the
// first wait() that returned, or the Work's release by the job).
//
// Identity without a plan (CaptureSession): message k of channel (group, src, dst, tag) in
// iteration i pairs with receive k of the same channel; collective k of a group in iteration
// i is the same collective on every member.
//
// Group names: the job's group_desc (new_group(..., group_desc="pp")), or a name set with
// stagescope_torch.name_group(); the default group is "world", others "group<uid>".
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "app/capture/CaptureSession.h"
#include "core/events/Events.h"

namespace stagescope::capture {

class RecordingBackend final : public c10d::Backend {
 public:
  // `globalRanks[g]` is the global rank of group rank g (empty: the default group, where
  // group rank == global rank).  Starts the CaptureSession for this process if needed.
  RecordingBackend(c10::intrusive_ptr<c10d::Backend> inner, std::vector<int64_t> globalRanks,
                   std::chrono::milliseconds timeout);

  // The name used in edges and collective rows ("pp" -> "pp:stage0->stage1").
  void setName(std::string name);
  std::string name() const;
  const c10::intrusive_ptr<c10d::Backend>& inner() const { return inner_; }
  int globalRank(int groupRank) const;

  const std::string getBackendName() const override { return "stagescope"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void setGroupUid(const std::string& uid) override;
  void eagerConnectSingleDevice(at::Device device) override;
  void abort() override;
  void shutdown() override;

  // ---- point to point ----
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // ---- collectives ----
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

 private:
  using Post = std::function<c10::intrusive_ptr<c10d::Work>()>;
  // The p2p_batches row of an op posted inside a batch_isend_irecv (none outside one).
  void recordBatchMember(CaptureSession& session, const CaptureSession::OpIds& ids) const;
  c10::intrusive_ptr<c10d::Work> p2p(events::Side side, std::vector<at::Tensor>& tensors,
                                     int peerGroupRank, int tag, const Post& post);
  // `inputs` are digested at post time, `outputs` at completion; root is a group rank or -1.
  c10::intrusive_ptr<c10d::Work> collective(const char* op, std::vector<at::Tensor> inputs,
                                            std::vector<at::Tensor> outputs, int rootGroupRank,
                                            const std::string& reduceOp, const Post& post);

  c10::intrusive_ptr<c10d::Backend> inner_;
  std::vector<int64_t> globalRanks_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex nameMu_;
  std::string name_;  // explicit name (name_group); empty: from the group description
};

}  // namespace stagescope::capture
