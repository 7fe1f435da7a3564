#include "app/capture/RecordingBackend.h"

#include <ATen/ATen.h>

#include <sstream>

#include "app/capture/DigestWorker.h"
#include "app/capture/RecordingWork.h"
#include "core/engine/Clock.h"
#include "core/engine/TensorDigest.h"
#include "core/events/ShapeMessage.h"

namespace stagescope::capture {

using events::RecordLevel;
using events::Side;

namespace {

int64_t bytesOf(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += static_cast<int64_t>(t.nbytes());
  return n;
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

const char* reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "sum";
    case c10d::ReduceOp::AVG:
      return "avg";
    case c10d::ReduceOp::PRODUCT:
      return "product";
    case c10d::ReduceOp::MIN:
      return "min";
    case c10d::ReduceOp::MAX:
      return "max";
    case c10d::ReduceOp::BAND:
      return "band";
    case c10d::ReduceOp::BOR:
      return "bor";
    case c10d::ReduceOp::BXOR:
      return "bxor";
    case c10d::ReduceOp::PREMUL_SUM:
      return "premul_sum";
    default:
      return "other";
  }
}

// Bytes of every tensor of one posted message: what a receive expects (said when it fails).
int64_t bytesPosted(const std::vector<events::TransferRecord>& records) {
  int64_t n = 0;
  for (const auto& r : records) n += r.bytes;
  return n;
}

// Registers a posted operation with the hang watchdog; returns its id (0: no watchdog).
uint64_t watch(HangWatchdog* dog, events::WaitRecord w, std::string what,
               std::chrono::milliseconds timeout, int64_t postNs,
               std::function<void()> onStuck = {}) {
  if (!dog) return 0;
  w.timeoutSeconds = static_cast<double>(timeout.count()) / 1000.0;
  PendingOp op;
  op.wait = std::move(w);
  op.what = std::move(what);
  op.timeout = timeout;
  op.postNs = postNs;
  op.onStuck = std::move(onStuck);
  return dog->add(std::move(op));
}

}  // namespace

RecordingBackend::RecordingBackend(c10::intrusive_ptr<c10d::Backend> inner,
                                   std::vector<int64_t> globalRanks,
                                   std::chrono::milliseconds timeout)
    : c10d::Backend(inner->getRank(), inner->getSize()),
      inner_(std::move(inner)),
      globalRanks_(std::move(globalRanks)),
      timeout_(timeout) {
  if (!globalRanks_.empty() && static_cast<int>(globalRanks_.size()) != getSize()) {
    throw std::invalid_argument("stagescope backend: global_ranks_in_group has " +
                                std::to_string(globalRanks_.size()) +
                                " entries, expected the group size " + std::to_string(getSize()));
  }
  auto& session = CaptureSession::instance();
  if (globalRanks_.empty()) {
    session.start(getRank(), getSize());  // the default group: group rank == global rank
  } else if (!session.started()) {
    throw std::logic_error(
        "stagescope backend: a subgroup was created before the default group; use "
        "init_process_group(backend='stagescope') first");
  }
}

void RecordingBackend::setName(std::string name) {
  std::lock_guard lock(nameMu_);
  name_ = std::move(name);
}

std::string RecordingBackend::name() const {
  {
    std::lock_guard lock(nameMu_);
    if (!name_.empty()) return name_;
  }
  const std::string& desc = getGroupDesc();
  if (desc == "default_pg" || (desc.empty() && globalRanks_.empty())) return "world";
  if (desc.empty() || desc == "undefined") return "group" + getGroupUid();
  return desc;
}

int RecordingBackend::globalRank(int groupRank) const {
  if (globalRanks_.empty()) return groupRank;
  if (groupRank < 0 || groupRank >= static_cast<int>(globalRanks_.size())) return -1;
  return static_cast<int>(globalRanks_[groupRank]);
}

c10::intrusive_ptr<c10d::Backend::Options> RecordingBackend::getBackendOptions() {
  return inner_->getBackendOptions();
}
void RecordingBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  inner_->setTimeout(timeout);
}
void RecordingBackend::setSequenceNumberForGroup() {
  inner_->setSequenceNumberForGroup();
}
uint64_t RecordingBackend::getSequenceNumberForGroup() {
  return inner_->getSequenceNumberForGroup();
}
void RecordingBackend::setGroupUid(const std::string& uid) {
  c10d::Backend::setGroupUid(uid);
  inner_->setGroupUid(uid);
}
void RecordingBackend::eagerConnectSingleDevice(at::Device device) {
  inner_->eagerConnectSingleDevice(device);
}
void RecordingBackend::abort() {
  inner_->abort();
}
void RecordingBackend::shutdown() {
  inner_->shutdown();
}

// ---- point to point ---------------------------------------------------------------------------

namespace {
// A shape preamble as Megatron-Core sends one (events/ShapeMessage.h): one 1-D int64 tensor of
// at most 8 elements (a payload's number of dimensions).
bool isShapePreamble(const std::vector<at::Tensor>& tensors) {
  return tensors.size() == 1 && tensors[0].scalar_type() == at::kLong && tensors[0].dim() == 1 &&
         tensors[0].numel() >= 1 && tensors[0].numel() <= 8;
}
}  // namespace

namespace {
// What the job's call means by a message it posts, when its helpers said so (record_roles):
// a `message_roles` row keyed like the message's transfer row.
void recordRole(CaptureSession& session, const at::Tensor& tensor, Side side,
                const CaptureSession::OpIds& ids) {
  auto role = session.roleOf(tensor.data_ptr());
  if (!role) return;
  events::MessageRoleRecord r;
  r.rank = session.rank();
  r.iteration = ids.iteration;
  r.actionSeq = ids.seq;
  r.side = side;
  r.carries = role->carries;
  r.peerIsNext = role->peerIsNext;
  r.call = std::move(role->call);
  session.recorder().messageRole(std::move(r));
}
}  // namespace

// Posted by a batch_isend_irecv (stagescope_torch wraps it): which call, as data for the NCCL
// replay (NCCL runs the batch as one group call; Gloo, and so this backend, sees single ops).
void RecordingBackend::recordBatchMember(CaptureSession& session,
                                         const CaptureSession::OpIds& ids) const {
  const int batch = session.currentBatch();
  if (batch < 0) return;
  events::BatchMemberRecord member{session.rank(), ids.iteration, ids.seq, batch, {}};
  for (int g = 0; g < getSize(); ++g) member.groupRanks.push_back(globalRank(g));
  session.recorder().batchMember(std::move(member));
}

namespace {

// One p2p message as this rank posts it: its channel, its identity in the capture session and
// the names its rows carry.
struct PostedMessage {
  Side side = Side::Send;
  std::string group;       // the backend's name (RecordingBackend::name)
  int me = 0;              // this rank's group rank
  int srcG = 0, dstG = 0;  // the channel in group ranks
  int src = 0, dst = 0;    // and in global ranks
  bool shape = false;      // a shape preamble (events/ShapeMessage.h), counted on its own
  CaptureSession::OpIds ids;
  std::string edge;  // "pp:stage0->stage1", "#tag<t>" and the shape suffix when they apply
  events::Direction direction = events::Direction::Activation;
  int peer() const { return side == Side::Send ? dst : src; }
};

// Edges are named in the group's rank order; the direction says which way a message goes.
std::string edgeName(const std::string& group, int srcG, int dstG, int tag, bool shape) {
  std::ostringstream edge;
  edge << group << ":stage" << std::min(srcG, dstG) << "->stage" << std::max(srcG, dstG);
  if (tag != 0) edge << "#tag" << tag;
  if (shape) edge << events::kShapeEdgeSuffix;
  return edge.str();
}

// Names the message `backend` posts to or from `peerGroupRank`, and takes its identity from
// the session (the channel's next message, or the shape of the next one).
PostedMessage messageOf(const RecordingBackend& backend, CaptureSession& session, Side side,
                        const std::vector<at::Tensor>& tensors, int peerGroupRank, int tag) {
  PostedMessage m;
  m.side = side;
  m.group = backend.name();
  m.me = backend.getRank();
  m.srcG = side == Side::Send ? m.me : peerGroupRank;
  m.dstG = side == Side::Send ? peerGroupRank : m.me;
  m.src = backend.globalRank(m.srcG);
  m.dst = backend.globalRank(m.dstG);
  m.shape = session.shapePreambles() && isShapePreamble(tensors);
  m.ids = m.shape ? session.nextShapeMessage(m.group, m.src, m.dst, tag)
                  : session.nextMessage(m.group, m.src, m.dst, tag);
  m.edge = edgeName(m.group, m.srcG, m.dstG, tag, m.shape);
  m.direction = m.srcG < m.dstG ? events::Direction::Activation : events::Direction::Gradient;
  return m;
}

// One transfer row per tensor of the message (times still open).
std::vector<events::TransferRecord> transferRecords(int rank, const PostedMessage& m,
                                                    const std::vector<at::Tensor>& tensors) {
  std::vector<events::TransferRecord> records(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& r = records[i];
    r.rank = rank;
    r.side = m.side;
    r.srcRank = m.src;
    r.dstRank = m.dst;
    r.srcGroupRank = m.srcG;
    r.dstGroupRank = m.dstG;
    r.edge = m.edge;
    r.direction = m.direction;
    r.iteration = m.ids.iteration;
    r.microbatch = m.ids.index;
    r.actionSeq = m.ids.seq;
    r.shape = engine::shapeOf(tensors[i]);
    r.dtype = engine::dtypeName(tensors[i]);
    r.bytes = static_cast<int64_t>(tensors[i].nbytes());
  }
  return records;
}

// A posted send owns its bytes: copied (from level stats) before the inner backend sees them;
// the digest runs on the DigestWorker once the op completed.  A receive has none yet.
std::vector<Snapshot> sentBytes(Side side, RecordLevel level,
                                const std::vector<at::Tensor>& tensors) {
  std::vector<Snapshot> sent;
  if (side == Side::Send && level >= RecordLevel::Stats) {
    for (const auto& t : tensors) sent.push_back(snapshotOf(t));
  }
  return sent;
}

// SF/RF for a message up the group's rank order (an activation), SB/RB for one down.
events::ActionKind actionKindOf(Side side, events::Direction direction) {
  const bool forward = direction == events::Direction::Activation;
  if (side == Side::Send)
    return forward ? events::ActionKind::SendForward : events::ActionKind::SendBackward;
  return forward ? events::ActionKind::RecvForward : events::ActionKind::RecvBackward;
}

// The message's action row, posted at `startNs` (its end is set at completion).
events::ActionRecord actionOf(int rank, const PostedMessage& m, int64_t startNs) {
  events::ActionRecord action;
  action.rank = rank;
  action.iteration = m.ids.iteration;
  action.seq = m.ids.seq;
  action.kind = actionKindOf(m.side, m.direction);
  action.microbatch = m.ids.index;
  action.module = m.group;
  action.stage = m.me;
  action.peers = {m.peer()};
  action.startNs = startNs;
  return action;
}

// What this rank waits on while the operation is pending (the hang watchdog's row).
events::WaitRecord waitOf(int rank, const PostedMessage& m, events::ActionKind kind) {
  events::WaitRecord wait;
  wait.rank = rank;
  wait.iteration = m.ids.iteration;
  wait.actionSeq = m.ids.seq;
  wait.action = kind;
  wait.microbatch = m.ids.index;
  wait.peer = m.peer();
  wait.op = m.side == Side::Send ? events::WaitOp::Send : events::WaitOp::Recv;
  wait.edge = m.edge;
  wait.direction = m.direction;
  return wait;
}

// The operation in words, for the watchdog's and a failure's sentences; `bytes` is what the
// message posted (what a receive expects).
std::string describe(const PostedMessage& m, int64_t bytes) {
  std::ostringstream what;
  what << (m.side == Side::Send ? "send to" : "recv from") << " rank " << m.peer() << " on "
       << m.edge << " (iteration " << m.ids.iteration << ", "
       << (m.shape ? "shape of message #" : "message #") << m.ids.index << ", op #" << m.ids.seq
       << ", " << bytes << " bytes)";
  return what.str();
}

// The rows of a message that completed or failed: each transfer with the digest of its bytes
// (and them as payload at level full), then the action, only when it succeeded: a failed send
// keeps its transfer row (what was sent) but no action, so "last completed" stays true.
void recordMessage(std::vector<events::TransferRecord>& records, events::ActionRecord& action,
                   std::vector<Snapshot>& bytes, bool ok, RecordLevel level) {
  auto& rec = CaptureSession::instance().recorder();
  for (size_t i = 0; i < records.size(); ++i) {
    auto& r = records[i];
    if (i < bytes.size()) {
      const auto d = digestOf(bytes[i]);
      r.checksum = d.checksum;
      r.hasStats = true;
      r.stats = d.stats;
      if (level >= RecordLevel::Full) r.payload = std::move(bytes[i].bytes);
    }
    rec.transfer(std::move(r));
  }
  if (ok) rec.action(std::move(action));
}

// A posted message's completion (RecordingWork::OnDone, called once): tells the watchdog and
// the session how it ended, then records its rows, on the DigestWorker from level stats.
struct P2pCompletion {
  std::vector<events::TransferRecord> records;
  events::ActionRecord action;
  std::vector<at::Tensor> tensors;  // a receive's bytes are read from them at completion
  Side side;
  RecordLevel level;
  std::vector<Snapshot> sent;  // a send's bytes, copied when it was posted
  events::WaitRecord wait;
  std::string what;
  HangWatchdog* dog;
  uint64_t watchId;

  void operator()(bool ok, bool /*waited*/, const std::string& error) {
    auto& s = CaptureSession::instance();
    const int64_t end = engine::nowNs();
    const bool reported = dog && dog->done(watchId);
    if (ok && reported) s.lateCompletion(wait, what, end - action.startNs);
    if (!ok) {
      s.failed(std::move(wait), what, error, reported);
      if (side == Side::Recv) return;  // nothing arrived; the send side keeps its record
    }
    for (auto& r : records) r.endNs = ok ? end : 0;
    action.endNs = end;
    record(ok);
  }

 private:
  // What arrived, copied now (once the completion returns the job may reuse the buffer), and
  // the rows recorded with it.
  void record(bool ok) {
    std::vector<Snapshot> bytes = std::move(sent);
    if (side == Side::Recv && level >= RecordLevel::Stats) {
      for (const auto& t : tensors) bytes.push_back(snapshotOf(t));
    }
    size_t size = 0;
    for (const auto& b : bytes) size += b.bytes.size();
    auto rows = [records = std::move(records), action = std::move(action), bytes = std::move(bytes),
                 ok, level = level]() mutable { recordMessage(records, action, bytes, ok, level); };
    if (level >= RecordLevel::Stats)
      DigestWorker::instance().submit(std::move(rows), size);
    else
      rows();
  }
};

}  // namespace

c10::intrusive_ptr<c10d::Work> RecordingBackend::p2p(Side side, std::vector<at::Tensor>& tensors,
                                                     int peerGroupRank, int tag, const Post& post) {
  auto& session = CaptureSession::instance();
  const RecordLevel level = session.level();
  if (level == RecordLevel::Off) return post();

  const PostedMessage m = messageOf(*this, session, side, tensors, peerGroupRank, tag);
  if (!tensors.empty() && !m.shape) recordRole(session, tensors[0], side, m.ids);  // what it means
  recordBatchMember(session, m.ids);  // the batch_isend_irecv that posted it, if any
  std::vector<events::TransferRecord> records = transferRecords(session.rank(), m, tensors);
  std::vector<Snapshot> sent = sentBytes(side, level, tensors);
  const int64_t start = engine::nowNs();
  for (auto& r : records) r.startNs = start;
  auto work = post();

  events::ActionRecord action = actionOf(session.rank(), m, start);
  events::WaitRecord wait = waitOf(session.rank(), m, action.kind);
  const std::string what = describe(m, bytesPosted(records));
  HangWatchdog* dog = session.watchdog();
  const uint64_t watchId = watch(dog, wait, what, session.hangTimeoutFor(timeout_), start);
  P2pCompletion onDone{.records = std::move(records),
                       .action = std::move(action),
                       .tensors = tensors,
                       .side = side,
                       .level = level,
                       .sent = std::move(sent),
                       .wait = std::move(wait),
                       .what = what,
                       .dog = dog,
                       .watchId = watchId};
  return c10::make_intrusive<RecordingWork>(std::move(work), std::move(onDone), dog, watchId);
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                      int tag) {
  return p2p(Side::Send, tensors, dstRank, tag,
             [&] { return inner_->send(tensors, dstRank, tag); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                      int tag) {
  return p2p(Side::Recv, tensors, srcRank, tag,
             [&] { return inner_->recv(tensors, srcRank, tag); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  // The source is known only after completion; forwarded without a record (documented).
  return inner_->recvAnysource(tensors, tag);
}

// ---- collectives ------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> RecordingBackend::collective(
    const char* op, std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
    int rootGroupRank, const std::string& reduceOp, const Post& post) {
  auto& session = CaptureSession::instance();
  const RecordLevel level = session.level();
  if (level == RecordLevel::Off) return post();

  const std::string group = name();
  const auto ids = session.nextCollective(group);
  events::CollectiveRecord r;
  r.rank = session.rank();
  r.iteration = ids.iteration;
  r.seq = ids.seq;
  r.groupSeq = ids.index;
  r.op = op;
  r.group = group;
  r.groupRank = getRank();
  r.groupSize = getSize();
  for (int g = 0; g < getSize(); ++g) r.groupRanks.push_back(globalRank(g));
  r.root = rootGroupRank >= 0 ? globalRank(rootGroupRank) : -1;
  r.reduceOp = reduceOp;
  if (!inputs.empty()) {
    r.shape = engine::shapeOf(inputs[0]);
    r.dtype = engine::dtypeName(inputs[0]);
  }
  r.bytes = bytesOf(inputs);
  // The inputs as posted (digested on the DigestWorker, or by the watchdog for a pending row).
  auto posted = std::make_shared<const Snapshot>(level >= RecordLevel::Stats ? snapshotOfAll(inputs)
                                                                             : Snapshot{});
  r.startNs = engine::nowNs();
  auto work = post();

  events::WaitRecord wait;
  wait.rank = session.rank();
  wait.iteration = ids.iteration;
  wait.actionSeq = ids.seq;
  wait.action = events::ActionKind::DpReduce;  // "a collective"; the op is in its row
  wait.microbatch = ids.index;                 // the collective's number on its group
  wait.peer = -1;  // who has not joined: read from the members' rows at analysis
  wait.op = events::WaitOp::Collective;
  wait.edge = group;
  std::ostringstream what;
  what << op << " on group " << group << " (iteration " << ids.iteration << ", collective #"
       << ids.index << " of the group, op #" << ids.seq << ")";
  HangWatchdog* dog = session.watchdog();
  // A stuck collective's row is written at once (state "pending"): it names the members.
  auto pendingRow = [r, posted] {
    auto row = r;
    row.state = "pending";
    if (!posted->empty()) row.inChecksum = digestOf(*posted).checksum;
    CaptureSession::instance().recorder().collective(std::move(row));
  };
  const uint64_t watchId =
      watch(dog, wait, what.str(), session.hangTimeoutFor(timeout_), r.startNs, pendingRow);

  auto onDone = [r = std::move(r), outputs = std::move(outputs), posted, level,
                 wait = std::move(wait), what = what.str(), dog,
                 watchId](bool ok, bool waited, const std::string& error) mutable {
    auto& s = CaptureSession::instance();
    const bool reported = dog && dog->done(watchId);
    r.endNs = ok ? engine::nowNs() : 0;
    r.state = !ok ? "failed" : waited ? "completed" : "unwaited";
    if (ok && reported) s.lateCompletion(wait, what, r.endNs - r.startNs);
    if (!ok) s.failed(std::move(wait), what, error, reported);
    if (reported) return;  // its pending row stands
    // The results, copied now: once this returns the job may reuse the buffers.
    Snapshot results;
    const size_t firstBytes = outputs.empty() ? 0 : outputs[0].nbytes();
    if (ok && level >= RecordLevel::Stats && !outputs.empty()) results = snapshotOfAll(outputs);
    const size_t size = posted->bytes.size() + results.bytes.size();
    auto record = [r = std::move(r), posted = std::move(posted), results = std::move(results),
                   firstBytes, level]() mutable {
      if (!posted->empty()) r.inChecksum = digestOf(*posted).checksum;
      if (!results.empty()) {
        const auto d = digestOf(results);
        r.outChecksum = d.checksum;
        r.hasStats = true;
        r.stats = d.stats;
        if (level >= RecordLevel::Full) {
          results.bytes.resize(std::min(results.bytes.size(), firstBytes));  // the first output
          r.payload = std::move(results.bytes);
        }
      }
      CaptureSession::instance().recorder().collective(std::move(r));
    };
    if (level >= RecordLevel::Stats)
      DigestWorker::instance().submit(std::move(record), size);
    else
      record();
  };
  return c10::make_intrusive<RecordingWork>(std::move(work), std::move(onDone), dog, watchId);
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  return collective("broadcast", tensors, tensors, static_cast<int>(opts.rootRank), "",
                    [&] { return inner_->broadcast(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  return collective("all_reduce", tensors, tensors, -1, reduceOpName(opts.reduceOp),
                    [&] { return inner_->allreduce(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  // Sparse tensors have no contiguous bytes to digest: forwarded without a record.
  return inner_->allreduce_sparse(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return collective("all_reduce_coalesced", tensors, tensors, -1, reduceOpName(opts.reduceOp),
                    [&] { return inner_->allreduce_coalesced(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  return collective("reduce", tensors, tensors, static_cast<int>(opts.rootRank),
                    reduceOpName(opts.reduceOp), [&] { return inner_->reduce(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return collective("all_gather", inputs, flatten(outputs), -1, "",
                    [&] { return inner_->allgather(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return collective("all_gather_into_tensor", {input}, {output}, -1, "",
                    [&] { return inner_->_allgather_base(output, input, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return collective("all_gather_coalesced", inputs, flatten(outputs), -1, "",
                    [&] { return inner_->allgather_coalesced(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return collective("all_gather_into_tensor_coalesced", inputs, outputs, -1, "",
                    [&] { return inner_->allgather_into_tensor_coalesced(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  return collective("gather", inputs, flatten(outputs), static_cast<int>(opts.rootRank), "",
                    [&] { return inner_->gather(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return collective("scatter", flatten(inputs), outputs, static_cast<int>(opts.rootRank), "",
                    [&] { return inner_->scatter(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return collective("reduce_scatter", flatten(inputs), outputs, -1, reduceOpName(opts.reduceOp),
                    [&] { return inner_->reduce_scatter(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return collective("reduce_scatter_tensor", {input}, {output}, -1, reduceOpName(opts.reduceOp),
                    [&] { return inner_->_reduce_scatter_base(output, input, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return collective("reduce_scatter_tensor_coalesced", inputs, outputs, -1,
                    reduceOpName(opts.reduceOp),
                    [&] { return inner_->reduce_scatter_tensor_coalesced(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::alltoall_base(at::Tensor& output,
                                                               at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& opts) {
  return collective("all_to_all_single", {input}, {output}, -1, "", [&] {
    return inner_->alltoall_base(output, input, outputSplits, inputSplits, opts);
  });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  return collective("all_to_all", inputs, outputs, -1, "",
                    [&] { return inner_->alltoall(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> RecordingBackend::barrier(const c10d::BarrierOptions& opts) {
  return collective("barrier", {}, {}, -1, "", [&] { return inner_->barrier(opts); });
}

void RecordingBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  inner_->monitoredBarrier(opts, waitAllRanks);
}

}  // namespace stagescope::capture
