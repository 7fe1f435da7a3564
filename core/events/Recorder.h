// The Recorder interface: how the engine reports what it plans and does.
//
// Contract: every method may be called from the rank's schedule thread and must return
// quickly (enqueue only); implementations (storage/ShardWriter) do I/O on their own thread.
// Records are taken by value (moved in).  `flush()` blocks until everything enqueued so far
// is durable; `close()` flushes and stops.  A Recorder belongs to one rank.
#pragma once

#include "core/events/Events.h"

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
  void flush() override {}
  void close() override {}
};

}  // namespace stagescope::events
