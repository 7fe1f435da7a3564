#include "core/engine/Communicator.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include "core/engine/BackendError.h"
#include "core/engine/Clock.h"
#include "core/engine/TensorDigest.h"
#include "core/events/FaultPhrase.h"

namespace stagescope::engine {

using events::Direction;
using events::Side;

at::Tensor prepareForComm(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (t.dim() == 2) return t.unsqueeze(-1);
  if (t.dim() == 3 && t.size(2) == 1) {
    throw std::invalid_argument(
        "tensor of shape [" + std::to_string(t.size(0)) + "," + std::to_string(t.size(1)) +
        ",1] is ambiguous for pipeline communication (it would be restored as 2D)");
  }
  return t;
}

at::Tensor restoreFromComm(const at::Tensor& t) {
  if (t.defined() && t.dim() == 3 && t.size(2) == 1) return t.squeeze(-1);
  return t;
}

std::vector<at::Tensor> splitForPeers(const at::Tensor& t, int parts, int axis) {
  std::vector<at::Tensor> out;
  for (auto& piece : at::tensor_split(t, parts, axis)) out.push_back(piece.contiguous());
  return out;
}

namespace {

// The shape header, int64[10]: [0] ndim (plus kSeparate, below), [1..6] dims, [7] dtype
// code, [8] the sender's checksum of the payload bytes (FNV-1a 64, TensorDigest), [9] 1 when
// [8] holds one (levels stats and full), else 0.
constexpr int kMaxDims = 6;
constexpr int kHeaderLen = 10;
constexpr int kDtypeAt = 7, kChecksumAt = 8, kHasChecksumAt = 9;

at::Tensor makeHeader(const at::Tensor& t) {
  if (t.dim() > kMaxDims) throw std::invalid_argument("tensor rank > 6 cannot be sent");
  at::Tensor h = at::zeros({kHeaderLen}, at::TensorOptions().dtype(at::kLong));
  auto* p = h.data_ptr<int64_t>();
  p[0] = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) p[1 + i] = t.size(i);
  p[kDtypeAt] = static_cast<int64_t>(t.scalar_type());
  return h;
}

at::Tensor allocateFromHeader(const at::Tensor& header, const std::string& what,
                              at::Device device) {
  const at::Tensor h = header.to(at::kCPU);
  const auto* p = h.data_ptr<int64_t>();
  if (p[0] < 1 || p[0] > kMaxDims) {
    throw std::runtime_error(what + ": received a shape header with ndim " + std::to_string(p[0]) +
                             " (expected 1..6)");
  }
  std::vector<int64_t> shape(p + 1, p + 1 + p[0]);
  auto dtype = static_cast<at::ScalarType>(p[kDtypeAt]);
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
}

// Point-to-point frames.  Every message starts with the 80-byte shape header.  The plan says
// what each message carries (plan::Message::shape/dtype), so the receiver posts a frame of
// header + the planned payload bytes and the payload travels inside it (one message).  A
// sender whose tensor differs from the plan (a fault, a bug) pads the frame to the planned
// size, flags it kSeparate, and sends the payload as its own message: it still arrives
// intact, the receiver records it as it came and stops with a diagnosis naming both shapes
// (verifyReceived).  The header's shape is a verification, never the source, of a planned
// message.  Over NCCL the payload always travels separately.
constexpr int64_t kHeaderBytes = kHeaderLen * static_cast<int64_t>(sizeof(int64_t));
constexpr int64_t kSeparate = int64_t{1} << 16;  // added to header[0] (ndim)

// `checksum`: the sender's checksum of `payload` (taken before any fault touched it), or
// nullptr below level stats.
at::Tensor makeFrame(const at::Tensor& payload, int64_t frameBytes, bool inlined,
                     const uint64_t* checksum) {
  at::Tensor header = makeHeader(payload);
  auto* h = header.data_ptr<int64_t>();
  if (!inlined) h[0] += kSeparate;
  if (checksum) {
    std::memcpy(&h[kChecksumAt], checksum, sizeof(uint64_t));
    h[kHasChecksumAt] = 1;
  }
  at::Tensor frame = at::zeros({kHeaderBytes + frameBytes}, at::TensorOptions().dtype(at::kByte));
  auto* out = static_cast<uint8_t*>(frame.data_ptr());
  std::memcpy(out, header.data_ptr(), kHeaderBytes);
  if (inlined) std::memcpy(out + kHeaderBytes, payload.data_ptr(), payload.nbytes());
  return frame;
}

}  // namespace

namespace {

// The tensor a message is planned to carry; undefined shape when the plan has none (a plan
// assembled by hand, as the communicator tests do to send batches no config can express:
// such a message takes its shape from the header).
bool planned(const plan::Message& m) {
  return !m.shape.empty() && !m.dtype.empty();
}
int64_t plannedBytes(const plan::Message& m) {
  if (!planned(m)) return 0;
  int64_t n = 1;
  for (int64_t d : m.shape) n *= d;
  return n * static_cast<int64_t>(c10::elementSize(scalarTypeOf(m.dtype)));
}
bool asPlanned(const at::Tensor& t, const plan::Message& m) {
  return planned(m) && t.sizes().vec() == m.shape && t.scalar_type() == scalarTypeOf(m.dtype);
}

// STAGESCOPE_SEPARATE_PAYLOADS=1 (test only, docs/environment.md): every payload travels as a
// second message, as on a GPU, also on the CPU where a planned one travels inside its frame.
// The first-send race test runs so: the copy on post is what keeps that path right, and the
// CPU's inline frames (a copy of their own) would hide its absence.
bool separatePayloads() {
  static const bool on = [] {
    const char* v = std::getenv("STAGESCOPE_SEPARATE_PAYLOADS");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

struct Communicator::Pending {
  events::TransferRecord rec;
  std::shared_ptr<Group> group;
  int peer = -1;
  const plan::Message* message = nullptr;  // receives: the plan's message (outlives run())
  int payloadTag = 0;                      // the tag of a separately sent payload
  at::Tensor header, payload;
  c10::intrusive_ptr<c10d::Work> headerWork, payloadWork;
  bool dropped = false;          // fault injection skipped the send: nothing to wait for or record
  bool local = false;            // receives: a local hand-off, already taken and recorded
  bool hasSentChecksum = false;  // receives: the frame carried the sender's checksum
  uint64_t sentChecksum = 0;
  std::vector<int64_t> headerShape;  // receives: the shape and dtype the frame's header names
  std::string headerDtype;
  CommIds ids;  // the action that posted it (sends complete lazily)
};

struct Communicator::Exchange {
  CommIds ids;
  std::vector<Pending> sends, recvs;  // in the plan's order
  // Send payloads per (direction, peerModule): the whole tensor, or its batch-axis parts.
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> parts;
};

namespace {

// "[12, 2, 16]"
std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

std::string hexText(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string describe(const events::TransferRecord& r) {
  const bool recv = r.side == Side::Recv;
  return std::string("the ") + events::toString(r.direction) + " of microbatch " +
         std::to_string(r.microbatch) + (recv ? " from rank " : " to rank ") +
         std::to_string(recv ? r.srcRank : r.dstRank) + " (edge " + r.edge + ")";
}

}  // namespace

Communicator::Communicator(const plan::RankPlan& me, ProcessGroups& groups,
                           events::Recorder& recorder, at::Device device, WaitState* wait,
                           const FaultInjector* faults)
    : me_(me), groups_(groups), recorder_(recorder), device_(device), wait_(wait), faults_(faults) {
  // NCCL moves device tensors; Gloo's send/recv take host tensors only, so CUDA payloads
  // are staged through host memory there.
  wireDevice_ = groups_.backendKind() == BackendKind::Nccl ? device_ : at::Device(at::kCPU);
}

// A communicator that goes away with sends still in flight (an error unwinds the schedule)
// still records what this rank put on the wire, ended now: a check can then compare it with
// what the peer received.  Never throws.
Communicator::~Communicator() {
  for (auto& p : inflight_) {
    if (p.dropped || recorder_.level() == events::RecordLevel::Off) continue;
    p.rec.endNs = nowNs();
    try {
      recorder_.transfer(std::move(p.rec));
    } catch (...) {
    }
  }
}

void Communicator::createAllGroups(const plan::RunConfig& config, const plan::Topology& topology,
                                   ProcessGroups& groups) {
  for (const auto& m : config.modules) {
    const auto& grid = topology.grid(m.name);
    for (const char* dim : {"tp", "pp", "dp"}) {
      for (const auto& ranks : grid.groupEnumeration({dim})) groups.get(ranks, m.name + "/" + dim);
    }
  }
  for (const auto& b : topology.bridges()) {
    groups.get(b.leaders(), "bridge:" + b.name);
    for (const auto& list : b.srcBoundary) groups.get(list, "boundary:" + b.name);
    for (const auto& list : b.destBoundary) groups.get(list, "boundary:" + b.name);
  }
}

// ---- posting ------------------------------------------------------------------------------

namespace {

// The record of this rank's side of a planned message.
events::TransferRecord baseRecord(int rank, const plan::Message& m, const Group& g,
                                  const CommIds& ids) {
  const bool send = m.side == Side::Send;
  events::TransferRecord r;
  r.rank = rank;
  r.side = m.side;
  r.srcRank = send ? rank : m.peer;
  r.dstRank = send ? m.peer : rank;
  r.srcGroupRank = g.localRank(r.srcRank);
  r.dstGroupRank = g.localRank(r.dstRank);
  r.edge = m.edge;
  r.edgeKind = m.edgeKind;
  r.role = m.role;
  r.direction = m.direction;
  r.iteration = ids.iteration;
  r.microbatch = m.microbatch;
  r.actionSeq = ids.actionSeq;
  return r;
}

}  // namespace

// Fills shape/dtype/bytes/checksum/stats/payload of a record from the tensor on the wire.
static void describeTensor(events::TransferRecord& r, const at::Tensor& t,
                           events::RecordLevel level) {
  r.shape = shapeOf(t);
  r.dtype = dtypeName(t);
  r.bytes = static_cast<int64_t>(t.nbytes());
  if (level >= events::RecordLevel::Stats) {
    TensorDigest d = digest(t);
    r.checksum = d.checksum;
    r.stats = d.stats;
    r.hasStats = true;
  }
  if (level >= events::RecordLevel::Full) r.payload = hostBytes(t);
}

// ---- posting ------------------------------------------------------------------------------

void Communicator::postSend(Exchange& ex, const plan::Message& m,
                            const std::shared_ptr<Group>& group, const at::Tensor& wire) {
  events::TransferRecord rec = baseRecord(me_.rank, m, *group, ex.ids);
  Pending p;
  p.group = group;
  p.peer = rec.dstRank;
  p.payload = wire;
  const FaultInjector* faults = faultsFor(ex.ids);
  if (faults) faults->beforeDigest(rec, p.payload);
  describeTensor(rec, p.payload, recorder_.level());
  const int64_t posted = nowNs();  // an injected delay counts into this send's time
  noteFault(faults, rec);          // before a planted delay: a rank stopped in it has said why
  const bool drop = faults && faults->beforeSend(rec, p.payload);
  // The frame holds the planned payload bytes (what the receiver posted); the payload
  // travels in it when it is what the plan says, else separately (see "frames" above).
  const int64_t frameBytes = wireDevice_.is_cpu() ? plannedBytes(m) : 0;
  const bool inlined = wireDevice_.is_cpu() && asPlanned(p.payload, m) && !separatePayloads();
  const uint64_t* checksum = rec.hasStats ? &rec.checksum : nullptr;
  p.header =
      makeFrame(p.payload.to(at::kCPU).contiguous(), frameBytes, inlined, checksum).to(wireDevice_);
  // Copy on post (the ownership contract in Communicator.h): an inline payload was copied
  // into the frame above; a separate one is cloned here, so the caller's tensor (which may
  // share storage with autograd state, e.g. a parameter's .grad) is never read by c10d.
  if (!inlined) p.payload = p.payload.clone(at::MemoryFormat::Contiguous);
  p.rec = std::move(rec);
  p.rec.startNs = posted;
  p.dropped = drop;
  if (!drop) {
    std::vector<at::Tensor> h{p.header}, d{p.payload};
    const int dst = group->localRank(p.peer);
    p.headerWork = group->backend->send(h, dst, plan::messageTag(ex.ids.iteration, m, false));
    if (!inlined) {
      p.payloadWork = group->backend->send(d, dst, plan::messageTag(ex.ids.iteration, m, true));
    }
  }
  ex.sends.push_back(std::move(p));
}

// Says what fault injection did to this send, as a diagnosis.
void Communicator::noteFault(const FaultInjector* faults, const events::TransferRecord& rec) {
  if (!faults) return;
  events::InjectedFaultRecord fault = faults->matching(rec);
  if (fault.kinds.empty()) return;
  const std::string kinds = events::faultPhrase(fault);
  fault.rank = me_.rank;
  fault.timeNs = nowNs();
  recorder_.injectedFault(fault);
  events::DiagnosisRecord d;
  d.rank = me_.rank;
  d.kind = events::DiagnosisKind::FaultInjected;
  d.iteration = rec.iteration;
  d.actionSeq = rec.actionSeq;
  d.waitsOnRank = rec.dstRank;
  d.message = "fault injection (" + kinds + ") on rank " + std::to_string(me_.rank) +
              "'s send of " + describe(rec) + " in iteration " + std::to_string(rec.iteration);
  d.timeNs = fault.timeNs;
  recorder_.diagnosis(std::move(d));
}

const FaultInjector* Communicator::faultsFor(const CommIds& ids) const {
  if (ids.action) {
    auto it = faultsByModule_.find(ids.action->module);
    if (it != faultsByModule_.end()) return it->second;
  }
  return faults_;
}

void Communicator::useFaults(const std::string& module, const FaultInjector* faults) {
  faultsByModule_[module] = faults;
}

// ---- local hand-off (Communicator.h) ------------------------------------------------------

struct Communicator::Parcel {
  at::Tensor payload;  // a private clone on the wire device
  bool hasChecksum = false;
  uint64_t checksum = 0;  // the sender's, taken before any fault touched the payload
};

void Communicator::handOff(Exchange& ex, const plan::Message& m,
                           const std::shared_ptr<Group>& group, const at::Tensor& wire) {
  events::TransferRecord rec = baseRecord(me_.rank, m, *group, ex.ids);
  rec.startNs = nowNs();
  at::Tensor payload = wire;
  const FaultInjector* faults = faultsFor(ex.ids);
  if (faults) faults->beforeDigest(rec, payload);
  describeTensor(rec, payload, recorder_.level());
  noteFault(faults, rec);  // before a planted delay: a rank stopped in it has said why
  const bool drop = faults && faults->beforeSend(rec, payload);
  if (drop) return;
  auto parcel = std::make_shared<Parcel>();
  parcel->payload = payload.clone(at::MemoryFormat::Contiguous);  // the send owns its bytes
  parcel->hasChecksum = rec.hasStats;
  parcel->checksum = rec.checksum;
  mailbox_[{ex.ids.iteration, m.edge, static_cast<int>(m.direction), m.microbatch}] = parcel;
  rec.endNs = nowNs();
  if (recorder_.level() > events::RecordLevel::Off) recorder_.transfer(std::move(rec));
}

void Communicator::takeLocal(Exchange& ex, const plan::Message& m,
                             const std::shared_ptr<Group>& group) {
  Pending p;
  p.group = group;
  p.peer = m.peer;
  p.message = &m;
  p.local = true;
  p.rec = baseRecord(me_.rank, m, *group, ex.ids);
  p.rec.startNs = nowNs();
  auto it = mailbox_.find({ex.ids.iteration, m.edge, static_cast<int>(m.direction), m.microbatch});
  if (it == mailbox_.end()) {
    throw std::runtime_error(
        "rank " + std::to_string(me_.rank) + " has no local hand-off of " + describe(p.rec) +
        " to receive (iteration " + std::to_string(ex.ids.iteration) + ", action " +
        std::to_string(ex.ids.actionSeq) + " " + events::toString(ex.ids.action->kind) +
        "): this rank's own send of it was dropped or never ran");
  }
  p.payload = it->second->payload;
  p.hasSentChecksum = it->second->hasChecksum;
  p.sentChecksum = it->second->checksum;
  mailbox_.erase(it);
  p.rec.endNs = nowNs();
  describeTensor(p.rec, p.payload, recorder_.level());
  if (recorder_.level() > events::RecordLevel::Off) recorder_.transfer(p.rec);
  p.headerShape = p.payload.sizes().vec();  // what the "frame" says is what was handed over
  p.headerDtype = dtypeName(p.payload);
  verifyReceived(p, ex.ids);
  ex.recvs.push_back(std::move(p));
}

void Communicator::postRecv(Exchange& ex, const plan::Message& m,
                            const std::shared_ptr<Group>& group) {
  Pending p;
  p.group = group;
  p.peer = m.peer;
  p.message = &m;
  p.payloadTag = plan::messageTag(ex.ids.iteration, m, true);
  p.rec = baseRecord(me_.rank, m, *group, ex.ids);
  p.rec.startNs = nowNs();
  const int64_t expected = wireDevice_.is_cpu() ? plannedBytes(m) : 0;
  p.header = at::empty({kHeaderBytes + expected},
                       at::TensorOptions().dtype(at::kByte).device(wireDevice_));
  std::vector<at::Tensor> h{p.header};
  p.headerWork = group->backend->recv(h, group->localRank(p.peer),
                                      plan::messageTag(ex.ids.iteration, m, false));
  ex.recvs.push_back(std::move(p));
}

// The bytes a planned send carries: this stage's activation, or the input gradient keyed by
// the message's peer module; split along the batch axis when the plan says so.
at::Tensor Communicator::sendPayload(Exchange& ex, const plan::Message& m,
                                     const at::Tensor* activation,
                                     const std::map<std::string, at::Tensor>* gradients) {
  auto& parts = ex.parts[{static_cast<int>(m.direction), m.peerModule}];
  if (parts.empty()) {
    at::Tensor whole;
    if (m.direction == Direction::Activation) {
      if (!activation || !activation->defined()) {
        throw std::runtime_error("rank " + std::to_string(me_.rank) +
                                 ": no activation to send on edge " + m.edge);
      }
      whole = prepareForComm(activation->detach());
    } else {
      at::Tensor g;
      if (gradients) {
        auto it = gradients->find(m.peerModule);
        if (it != gradients->end()) g = it->second;
      }
      if (!g.defined()) {
        throw std::runtime_error("rank " + std::to_string(me_.rank) + ": no input gradient for '" +
                                 m.peerModule + "' to send back on edge " + m.edge);
      }
      whole = m.edgeKind == events::EdgeKind::P2P ? prepareForComm(g.detach()) : g.detach();
    }
    whole = whole.to(wireDevice_).contiguous();
    parts = m.parts > 1 ? splitForPeers(whole, m.parts, layout_.batchAxis)
                        : std::vector<at::Tensor>{whole};
  }
  if (m.part < 0 || m.part >= static_cast<int>(parts.size())) {
    throw std::runtime_error("rank " + std::to_string(me_.rank) + ": the plan's message to rank " +
                             std::to_string(m.peer) + " on edge " + m.edge + " is part " +
                             std::to_string(m.part) + " of " + std::to_string(parts.size()));
  }
  return parts[m.part];
}

// ---- completion ---------------------------------------------------------------------------

// How a failed wait ended: "gave up after 3 s" (its timeout), or "stopped after 0.4 s, before
// its 3 s timeout" when it ended early (a peer closed the connection): the time is the one
// measured, never the timeout's.
std::string Communicator::waitedPhrase(std::chrono::steady_clock::time_point started) const {
  const double timeoutS = static_cast<double>(groups_.timeout().count()) / 1000.0;
  const double waitedS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char waited[96];
  if (waitedS < 0.9 * timeoutS)
    std::snprintf(waited, sizeof waited, "stopped after %.1f s, before its %g s timeout", waitedS,
                  timeoutS);
  else
    std::snprintf(waited, sizeof waited, "gave up after %g s", timeoutS);
  return waited;
}

events::WaitRecord Communicator::waitRecord(const CommIds& ids, int peer,
                                            const std::string& error) const {
  events::WaitRecord w;
  w.rank = me_.rank;
  w.iteration = ids.iteration;
  w.actionSeq = ids.actionSeq;
  if (ids.action) {
    w.action = ids.action->kind;
    w.microbatch = ids.action->microbatch;
  }
  w.peer = peer;
  w.timeoutSeconds = static_cast<double>(groups_.timeout().count()) / 1000.0;
  w.error = error.substr(0, std::min(error.find('\n'), size_t{200}));
  w.timeNs = nowNs();
  return w;
}

void Communicator::waitFor(const c10::intrusive_ptr<c10d::Work>& work, const Pending& p,
                           const CommIds& ids) {
  if (!work) return;
  if (wait_) {
    wait_->waitingOn = p.peer;
    wait_->direction = static_cast<int>(p.rec.direction);
    wait_->microbatch = p.rec.microbatch;
  }
  const auto started = std::chrono::steady_clock::now();
  try {
    work->wait(groups_.timeout());
  } catch (const std::exception& e) {
    // "rank 3 waits for the activation of microbatch 5 from rank 2 (edge ..., iteration 0,
    // action 9 SB_RF); gave up after 3 s: <backend error>", or "; stopped after 0.4 s, before
    // its 3 s timeout: <backend error>" when the wait ended early (a peer closed the
    // connection): the time is the one measured, never the timeout's.
    const std::string what = describe(p.rec);
    events::WaitRecord w = waitRecord(ids, p.peer, backendReason(e));
    w.op = p.rec.side == Side::Recv ? events::WaitOp::Recv : events::WaitOp::Send;
    w.microbatch = p.rec.microbatch;
    w.edge = p.rec.edge;
    w.direction = p.rec.direction;
    throw CommTimeout(std::move(w),
                      "rank " + std::to_string(me_.rank) +
                          (p.rec.side == Side::Recv ? " waits for " : " waits to send ") +
                          what.substr(0, what.size() - 1) + ", iteration " +
                          std::to_string(ids.iteration) + ", action " +
                          std::to_string(ids.actionSeq) + " " + events::toString(ids.action->kind) +
                          "); " + waitedPhrase(started) + ": " + backendReason(e));
  }
  if (wait_) wait_->waitingOn = -1;
}

void Communicator::completeRecvs(Exchange& ex, std::vector<Pending>& recvs) {
  for (auto& p : recvs) {
    if (p.local) continue;
    waitFor(p.headerWork, p, ex.ids);
    const at::Tensor frame = p.header.to(at::kCPU);
    at::Tensor header = at::empty({kHeaderLen}, at::TensorOptions().dtype(at::kLong));
    std::memcpy(header.data_ptr(), frame.data_ptr(), kHeaderBytes);
    auto* h = header.data_ptr<int64_t>();
    const bool separate = h[0] >= kSeparate;
    if (separate) h[0] -= kSeparate;
    p.hasSentChecksum = h[kHasChecksumAt] == 1;
    std::memcpy(&p.sentChecksum, &h[kChecksumAt], sizeof(uint64_t));
    const std::string what = "rank " + std::to_string(me_.rank) + " " + describe(p.rec);
    // The plan's shape is the source; a separate payload (the sender's tensor is not what the
    // plan says) is received as the header describes it, to be recorded and diagnosed.
    const at::Tensor fromHeader = allocateFromHeader(header, what, wireDevice_);
    p.headerShape = fromHeader.sizes().vec();
    p.headerDtype = dtypeName(fromHeader);
    p.payload =
        planned(*p.message) && !separate
            ? at::empty(
                  p.message->shape,
                  at::TensorOptions().dtype(scalarTypeOf(p.message->dtype)).device(wireDevice_))
            : fromHeader;
    const int64_t bytes = static_cast<int64_t>(p.payload.nbytes());
    if (separate) {
      std::vector<at::Tensor> d{p.payload};
      p.payloadWork = p.group->backend->recv(d, p.group->localRank(p.peer), p.payloadTag);
    } else if (frame.numel() - kHeaderBytes != bytes) {
      throw std::runtime_error(what + ": an inline payload of " +
                               std::to_string(frame.numel() - kHeaderBytes) +
                               " bytes for a tensor of " + std::to_string(bytes) + " bytes");
    } else {
      std::memcpy(p.payload.data_ptr(),
                  static_cast<const uint8_t*>(frame.data_ptr()) + kHeaderBytes, bytes);
    }
  }
  for (auto& p : recvs) {
    if (p.local) continue;
    waitFor(p.payloadWork, p, ex.ids);
    p.rec.endNs = nowNs();
    describeTensor(p.rec, p.payload, recorder_.level());
    if (recorder_.level() > events::RecordLevel::Off) recorder_.transfer(p.rec);
    verifyReceived(p, ex.ids);
  }
}

// In-band verification, before the payload is used (gathered, broadcast, handed to the
// model): what arrived must be what the plan says (the header's shape and dtype, and the
// payload's, equal the planned message's) and, at levels stats and full, its checksum must
// equal the one the sender put in the frame.  A mismatch is recorded as a "corrupt_transfer"
// diagnosis naming both sides and stops the rank.
void Communicator::verifyReceived(const Pending& p, const CommIds& ids) {
  std::string why;
  if (p.hasSentChecksum) {
    const uint64_t got = p.rec.hasStats ? p.rec.checksum : digest(p.payload).checksum;
    if (got != p.sentChecksum) {
      why = "sender rank " + std::to_string(p.rec.srcRank) + " checksum " +
            hexText(p.sentChecksum) + ", receiver rank " + std::to_string(me_.rank) + " checksum " +
            hexText(got) + " of " + std::to_string(p.payload.nbytes()) + " bytes " +
            shapeText(p.payload.sizes().vec());
    }
  }
  const plan::Message& m = *p.message;
  if (planned(m)) {
    if (p.headerShape != m.shape || p.headerDtype != m.dtype || !asPlanned(p.payload, m)) {
      why += (why.empty() ? "" : "; ") + std::string("the sender's frame says ") +
             shapeText(p.headerShape) + " " + p.headerDtype + ", the plan " + shapeText(m.shape) +
             " " + m.dtype;
    }
  }
  if (why.empty()) return;
  const std::string message =
      "corrupted transfer: rank " + std::to_string(me_.rank) + " received the " +
      events::toString(p.rec.direction) + " of microbatch " + std::to_string(p.rec.microbatch) +
      " from rank " + std::to_string(p.rec.srcRank) + " on edge " + p.rec.edge + " (iteration " +
      std::to_string(ids.iteration) + ", action " + std::to_string(ids.actionSeq) + " " +
      events::toString(ids.action->kind) + "): " + why;
  events::DiagnosisRecord d;
  d.rank = me_.rank;
  d.kind = events::DiagnosisKind::CorruptTransfer;
  d.iteration = ids.iteration;
  d.actionSeq = ids.actionSeq;
  d.waitsOnRank = p.rec.srcRank;
  d.message = message;
  d.timeNs = nowNs();
  recorder_.diagnosis(std::move(d));
  throw TransferCorrupt(me_.rank, p.rec.srcRank, message);
}

// Sends are waited for lazily: the schedule goes on while they drain (like PyTorch's
// pipelining, which waits on a send only at its next step).  The Work objects keep the
// payloads alive; completed sends are recorded at the next communication action, and every
// send is waited for, with the timeout, by finishSends() at the end of the iteration.
void Communicator::completeSends(Exchange& ex) {
  for (auto& p : ex.sends) {
    p.ids = ex.ids;
    inflight_.push_back(std::move(p));
  }
  ex.sends.clear();
  reapSends(false);
}

void Communicator::reapSends(bool block) {
  size_t kept = 0;
  for (size_t i = 0; i < inflight_.size(); ++i) {
    Pending& p = inflight_[i];
    const bool done = (!p.headerWork || p.headerWork->isCompleted()) &&
                      (!p.payloadWork || p.payloadWork->isCompleted());
    if (!done && !block) {
      if (kept != i) inflight_[kept] = std::move(p);
      ++kept;
      continue;
    }
    waitFor(p.headerWork, p, p.ids);  // rethrows a failed send's error
    waitFor(p.payloadWork, p, p.ids);
    p.rec.endNs = nowNs();
    if (!p.dropped && recorder_.level() > events::RecordLevel::Off) {
      recorder_.transfer(std::move(p.rec));
    }
  }
  inflight_.resize(kept);
}

void Communicator::finishSends() {
  reapSends(true);
}

at::Tensor Communicator::broadcastFromLeader(const plan::Broadcast& b, at::Tensor value,
                                             const CommIds& ids) {
  auto group = groups_.get(b.ranks, b.groupName);
  if (!group || !group->backend) return value;
  const int root = group->localRank(b.root);
  const bool leader = me_.rank == b.root;
  if (leader && !value.defined()) {
    throw std::runtime_error("rank " + std::to_string(me_.rank) + " leads the " +
                             events::toString(b.direction) + " broadcast of microbatch " +
                             std::to_string(b.microbatch) + " from '" + b.peerModule +
                             "' but the plan gave it no message to receive it");
  }
  at::Tensor header =
      leader ? makeHeader(value).to(wireDevice_)
             : at::zeros({kHeaderLen}, at::TensorOptions().dtype(at::kLong).device(wireDevice_));
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  auto run = [&](at::Tensor& t) {
    std::vector<at::Tensor> v{t};
    auto work = group->backend->broadcast(v, opts);
    const auto started = std::chrono::steady_clock::now();
    try {
      work->wait(groups_.timeout());
    } catch (const std::exception& e) {
      events::WaitRecord w = waitRecord(ids, b.root, backendReason(e));
      w.op = events::WaitOp::Broadcast;
      w.edge = "boundary:" + group->name;
      throw CommTimeout(std::move(w), "rank " + std::to_string(me_.rank) +
                                          " waits for the boundary broadcast from rank " +
                                          std::to_string(b.root) + " (group " + group->name +
                                          ", iteration " + std::to_string(ids.iteration) +
                                          ", action " + std::to_string(ids.actionSeq) + " " +
                                          events::toString(ids.action->kind) + "); " +
                                          waitedPhrase(started) + ": " + backendReason(e));
    }
  };
  run(header);
  // The plan says what the broadcast carries (the members allocate it); the header verifies
  // that the leader holds exactly that.
  const at::Tensor announced =
      allocateFromHeader(header, "boundary broadcast " + group->name, wireDevice_);
  if (!b.shape.empty() &&
      (announced.sizes().vec() != b.shape || announced.scalar_type() != scalarTypeOf(b.dtype))) {
    throw std::runtime_error(
        "rank " + std::to_string(me_.rank) + ": the boundary broadcast of " +
        events::toString(b.direction) + " microbatch " + std::to_string(b.microbatch) +
        " in group " + group->name + " carries " + shapeText(announced.sizes().vec()) + " " +
        dtypeName(announced) + ", the plan " + shapeText(b.shape) + " " + b.dtype);
  }
  if (!leader) {
    value = b.shape.empty()
                ? announced
                : at::empty(b.shape,
                            at::TensorOptions().dtype(scalarTypeOf(b.dtype)).device(wireDevice_));
  }
  value = value.contiguous();
  run(value);
  return value;
}

at::Tensor Communicator::toDevice(const at::Tensor& t) const {
  return restoreFromComm(t).to(device_);
}

// Hands out what arrived: P2P payloads directly; bridge payloads through the action's
// boundary broadcasts (the leader concatenates its parts in the plan's order).
void Communicator::deliver(Exchange& ex, std::map<std::string, at::Tensor>* inputsOut,
                           at::Tensor* gradOut) {
  auto put = [&](Direction dir, const std::string& key, const at::Tensor& value) {
    if (dir == Direction::Activation) {
      if (inputsOut) (*inputsOut)[key] = toDevice(value);
    } else if (gradOut) {
      *gradOut = toDevice(value);
    }
  };
  for (const auto& p : ex.recvs) {
    if (p.message->edgeKind == events::EdgeKind::P2P) {
      put(p.message->direction, p.message->peerModule, p.payload);
    }
  }
  for (const plan::Broadcast& b : ex.ids.action->broadcasts) {
    // In the plan's part order (receives pre-posted on the wire come before local hand-offs
    // in ex.recvs, so the order there is not the concatenation order).
    std::vector<std::pair<int, at::Tensor>> ordered;
    for (const auto& p : ex.recvs) {
      if (p.message->edgeKind == events::EdgeKind::Bridge && p.message->direction == b.direction &&
          p.message->peerModule == b.peerModule) {
        ordered.emplace_back(p.message->part, p.payload);
      }
    }
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<at::Tensor> parts;
    for (auto& [part, payload] : ordered) parts.push_back(payload);
    at::Tensor value = parts.empty() ? at::Tensor() : at::cat(parts, layout_.batchAxis);
    put(b.direction, b.peerModule, broadcastFromLeader(b, value, ex.ids));
  }
}

std::shared_ptr<Group> Communicator::groupOf(const plan::Message& m) {
  auto group = groups_.get(m.group, m.groupName);
  if (!group || !group->backend) {
    throw std::runtime_error("rank " + std::to_string(me_.rank) + ": the plan's message to rank " +
                             std::to_string(m.peer) + " on edge " + m.edge + " names group " +
                             m.groupName + " of which this rank is no member");
  }
  return group;
}

void Communicator::prepostRecvs(const CommIds& ids) {
  preposted_.reset();
  // Local hand-offs are taken from the mailbox in run(), after this rank's own send.
  bool any = false;
  for (const plan::Message& m : ids.action->messages) {
    any = any || (m.side == Side::Recv && m.peer != me_.rank);
  }
  if (!any) return;
  auto ex = std::make_unique<Exchange>();
  ex->ids = ids;
  for (const plan::Message& m : ids.action->messages) {
    if (m.side == Side::Recv && m.peer != me_.rank) postRecv(*ex, m, groupOf(m));
  }
  preposted_ = std::move(ex);
}

void Communicator::run(const CommIds& ids, const at::Tensor* activation,
                       const std::map<std::string, at::Tensor>* gradients,
                       std::map<std::string, at::Tensor>* inputsOut, at::Tensor* gradOut) {
  Exchange ex;
  ex.ids = ids;
  // Receives posted ahead for exactly this action (prepostRecvs) are used as they are; their
  // records start now, when this rank begins to wait for them.
  const bool preposted = preposted_ && preposted_->ids.action == ids.action &&
                         preposted_->ids.iteration == ids.iteration &&
                         preposted_->ids.actionSeq == ids.actionSeq;
  if (preposted) {
    ex.recvs = std::move(preposted_->recvs);
    for (auto& p : ex.recvs) p.rec.startNs = nowNs();
  }
  preposted_.reset();
  // Exactly the plan's messages, in its order (sends before receives): every send of the
  // action is in flight before this rank blocks on a receive.
  for (const plan::Message& m : ids.action->messages) {
    if (m.peer == me_.rank) {  // a local hand-off: no wire (its group may be this rank alone)
      auto group = groups_.get(m.group, m.groupName);
      if (!group) groupOf(m);  // throws: not a member
      if (m.side == Side::Send) {
        handOff(ex, m, group, sendPayload(ex, m, activation, gradients));
      } else {
        takeLocal(ex, m, group);
      }
      continue;
    }
    if (m.side == Side::Send) {
      postSend(ex, m, groupOf(m), sendPayload(ex, m, activation, gradients));
    } else if (!preposted) {
      postRecv(ex, m, groupOf(m));
    }
  }
  try {
    completeRecvs(ex, ex.recvs);
  } catch (...) {
    // A receive failed (timeout, peer gone, corrupted): still record what this rank put on
    // the wire, so a check can compare it with what the peer received.  End = the failure.
    for (auto& p : ex.sends) {
      p.rec.endNs = nowNs();
      if (!p.dropped && recorder_.level() > events::RecordLevel::Off) recorder_.transfer(p.rec);
    }
    throw;
  }
  completeSends(ex);
  deliver(ex, inputsOut, gradOut);
}

}  // namespace stagescope::engine
