// The Recorder interface: how the engine reports what it plans and does.
//
// Contract: every method may be called from the rank's schedule thread and must return
// quickly (enqueue only); implementations (storage/ShardWriter) do I/O on their own thread.
// Records are taken by value (moved in).  `flush()` blocks until everything enqueued so far
// is durable; `close()` flushes and stops.  A Recorder belongs to one rank.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/events/Events.h"
#include "core/events/MessageRole.h"
#include "core/events/ModuleStep.h"

namespace stagescope::events {

class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual RecordLevel level() const = 0;
  virtual void run(RunInfo info) = 0;  // rank 0 / launcher only
  virtual void rank(RankInfo info) = 0;
  virtual void planned(ActionRecord action) = 0;  // the plan, before running
  virtual void action(ActionRecord action) = 0;   // executed, with times
  virtual void transfer(TransferRecord transfer) = 0;
  virtual void gradient(GradientRecord gradient) = 0;
  virtual void loss(LossRecord loss) = 0;
  virtual void input(InputRecord input) = 0;
  virtual void diagnosis(DiagnosisRecord d) = 0;
  // Collectives of captured jobs; recorders that do not store them drop them.
  virtual void collective(CollectiveRecord) {}
  // What a captured message means in the job's call (MessageRole.h); recorders that do not
  // store them drop them.
  virtual void messageRole(MessageRoleRecord) {}
  // A module's reduction and loss scale of captured jobs (ModuleStep.h); dropped by default.
  virtual void moduleStep(ModuleStepRecord) {}
  // Which captured point-to-point ops one batch_isend_irecv posted; others drop them.
  virtual void batchMember(BatchMemberRecord) {}
  virtual void wait(WaitRecord w) = 0;  // what this rank waited on at a timeout
  // A planted fault that acted on a send of this rank; recorders that do not store them drop
  // them.
  virtual void injectedFault(InjectedFaultRecord) {}
  // The single-process reference (`run --reference`): its own tables, never per-rank rows.
  virtual void referenceLoss(LossRecord loss) = 0;
  virtual void referenceGradient(GradientRecord gradient) = 0;
  virtual void flush() = 0;
  virtual void close() = 0;
};

// A recorder that drops everything (level off).
class NullRecorder final : public Recorder {
 public:
  RecordLevel level() const override { return RecordLevel::Off; }
  void run(RunInfo) override {}
  void rank(RankInfo) override {}
  void planned(ActionRecord) override {}
  void action(ActionRecord) override {}
  void transfer(TransferRecord) override {}
  void gradient(GradientRecord) override {}
  void loss(LossRecord) override {}
  void input(InputRecord) override {}
  void diagnosis(DiagnosisRecord) override {}
  void wait(WaitRecord) override {}
  void referenceLoss(LossRecord) override {}
  void referenceGradient(GradientRecord) override {}
  void flush() override {}
  void close() override {}
};

}  // namespace stagescope::events

namespace stagescope::events {

// Applies a run's RecordFilter to every record of one rank before it reaches `inner`: plan,
// actions, transfers, gradients, losses and inputs of a filtered-out iteration, module or
// rank are dropped; run, rank, diagnosis and wait records always pass (a filter never hides
// why a run failed).  `inner` must outlive this object.
class FilteringRecorder final : public Recorder {
 public:
  FilteringRecorder(Recorder& inner, RecordFilter filter, int32_t rank, std::string module)
      : FilteringRecorder(inner, std::move(filter), rank, std::vector<std::string>{module}) {}
  // A rank holding stages of several modules (colocated) is kept when any of them is.
  FilteringRecorder(Recorder& inner, RecordFilter filter, int32_t rank,
                    const std::vector<std::string>& modules)
      : inner_(inner), filter_(std::move(filter)) {
    for (const auto& m : modules) keepsRank_ = keepsRank_ || filter_.keepsRank(rank, m);
  }
  RecordLevel level() const override { return inner_.level(); }
  void run(RunInfo info) override { inner_.run(std::move(info)); }
  void rank(RankInfo info) override { inner_.rank(std::move(info)); }
  void planned(ActionRecord a) override {
    if (keeps(a.iteration)) inner_.planned(std::move(a));
  }
  void action(ActionRecord a) override {
    if (keeps(a.iteration)) inner_.action(std::move(a));
  }
  void transfer(TransferRecord t) override {
    if (keeps(t.iteration)) inner_.transfer(std::move(t));
  }
  void gradient(GradientRecord g) override {
    if (keeps(g.iteration)) inner_.gradient(std::move(g));
  }
  void loss(LossRecord l) override {
    if (keeps(l.iteration)) inner_.loss(std::move(l));
  }
  void input(InputRecord in) override {
    if (keeps(in.iteration)) inner_.input(std::move(in));
  }
  void diagnosis(DiagnosisRecord d) override { inner_.diagnosis(std::move(d)); }
  void collective(CollectiveRecord c) override {
    if (keeps(c.iteration)) inner_.collective(std::move(c));
  }
  void moduleStep(ModuleStepRecord s) override {
    if (keeps(s.iteration)) inner_.moduleStep(std::move(s));
  }
  void wait(WaitRecord w) override { inner_.wait(std::move(w)); }
  void injectedFault(InjectedFaultRecord f) override { inner_.injectedFault(std::move(f)); }
  void referenceLoss(LossRecord l) override { inner_.referenceLoss(std::move(l)); }
  void referenceGradient(GradientRecord g) override { inner_.referenceGradient(std::move(g)); }
  void flush() override { inner_.flush(); }
  void close() override { inner_.close(); }

 private:
  bool keeps(int32_t iteration) const { return keepsRank_ && filter_.keepsIteration(iteration); }
  Recorder& inner_;
  RecordFilter filter_;
  bool keepsRank_ = false;
};

}  // namespace stagescope::events
