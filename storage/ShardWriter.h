// ShardWriter: the Recorder of one rank, writing that rank's shard file.
//
// Contract: the recording methods only move the record into an in-memory batch under a mutex
// (no I/O, no formatting) and return.  One writer thread per ShardWriter drains the batch
// into prepared INSERTs inside `BEGIN IMMEDIATE` transactions, committing when
// `batchRows` records are pending or every `commitIntervalMs`, whichever comes first.  The
// shard is in WAL mode with synchronous=NORMAL: a committed batch survives a crash or
// `kill -9` of the process (not a power loss), so a killed rank loses at most the records
// enqueued since the last commit.
//
// Levels: off writes an empty shard and drops every record; meta drops checksums, norms and
// tensor statistics; stats drops payload bytes; full keeps everything.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/events/Recorder.h"
#include "storage/RecordList.h"

namespace stagescope::storage {

struct ShardWriterOptions {
  int commitIntervalMs = 50;  // longest time a record waits before its batch commits
  size_t batchRows = 8192;    // a batch of this many pending records commits at once
  int busyTimeoutMs = 10000;  // SQLite busy_timeout on the shard connection
  // true: remove an existing shard (and its -wal/-shm/-journal) at open - for callers that
  // own the path (a launcher that checked it, a test).  false: the shard must not exist yet;
  // the file is created exclusively and open throws ShardExists when it, or one of its
  // -wal/-shm/-journal files, is already there (nothing is removed or changed).
  bool replaceExisting = true;
  // Back-pressure: a recording call blocks while this much is pending (records / payload bytes).
  size_t maxPendingRows = size_t{1} << 22;
  size_t maxPendingBytes = size_t{1} << 30;
};

// ShardWriter::open with replaceExisting = false found a file at the shard's path (or one of
// its -wal/-shm/-journal files).  what() = "<path>: exists".
class ShardExists : public std::runtime_error {
 public:
  ShardExists(std::string path, const std::string& message)
      : std::runtime_error(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }  // the file that was in the way

 private:
  std::string path_;
};

class ShardWriter final : public events::Recorder {
 public:
  // Creates the shard file (schema, `writer` row) and starts the writer thread.
  // Throws SqliteError (naming the file) when the shard cannot be created.
  static std::unique_ptr<ShardWriter> open(const std::string& shardPath, events::RecordLevel level,
                                           int rank, ShardWriterOptions opts = {});
  ~ShardWriter() override;  // close()

  events::RecordLevel level() const override { return level_; }
  void run(events::RunInfo info) override;
  void rank(events::RankInfo info) override;
  // Replaces every `ranks` row of rank `who` committed so far by `rows` (a captured job that
  // declares its layout after init_process_group: its placeholder row becomes the layout's).
  void replaceRanks(int32_t who, std::vector<events::RankInfo> rows);
  void planned(events::ActionRecord action) override;
  void action(events::ActionRecord action) override;
  void transfer(events::TransferRecord transfer) override;
  void gradient(events::GradientRecord gradient) override;
  void loss(events::LossRecord loss) override;
  void input(events::InputRecord input) override;
  void diagnosis(events::DiagnosisRecord d) override;
  void collective(events::CollectiveRecord c) override;
  void messageRole(events::MessageRoleRecord r) override;
  void moduleStep(events::ModuleStepRecord s) override;
  void batchMember(events::BatchMemberRecord b) override;
  void wait(events::WaitRecord w) override;
  void injectedFault(events::InjectedFaultRecord f) override;
  void referenceLoss(events::LossRecord loss) override;
  void referenceGradient(events::GradientRecord gradient) override;
  // Blocks until every record enqueued before the call is committed.  Throws
  // std::runtime_error when the writer thread has failed (disk full, I/O error).
  void flush() override;
  // Flushes, stops the writer thread, checkpoints and truncates the WAL.  Idempotent; never
  // throws (a failure is kept in error()).
  void close() override;

  const std::string& path() const { return path_; }
  // Empty while healthy; otherwise the first error of the writer thread.
  std::string error() const;
  uint64_t committedRecords() const;  // records committed so far

  // One drained batch of records, grouped by kind.  Public only for the implementation.
  struct Batch {
    std::vector<events::RunInfo> runs;
    RecordList<events::RankInfo> ranks;
    RecordList<events::ActionRecord> planned, actions;
    RecordList<events::TransferRecord> transfers;
    RecordList<events::GradientRecord> gradients;
    RecordList<events::LossRecord> losses;
    RecordList<events::InputRecord> inputs;
    RecordList<events::DiagnosisRecord> diagnoses;
    RecordList<events::CollectiveRecord> collectives;
    RecordList<events::MessageRoleRecord> messageRoles;
    RecordList<events::ModuleStepRecord> moduleSteps;
    RecordList<events::WaitRecord> waits;
    RecordList<events::InjectedFaultRecord> injectedFaults;
    RecordList<events::BatchMemberRecord> batchMembers;
    RecordList<events::LossRecord> referenceLosses;
    RecordList<events::GradientRecord> referenceGradients;
    std::vector<int32_t> replacedRanks;  // their committed `ranks` rows are deleted first
    size_t rows = 0;
    size_t bytes = 0;  // payload bytes
    void clear();
  };

 private:
  struct Impl;
  ShardWriter(std::string path, events::RecordLevel level, ShardWriterOptions opts);
  template <typename List, typename T>
  void enqueue(List Batch::*list, T&& record, size_t payloadBytes);
  void loop();

  std::string path_;
  events::RecordLevel level_;
  ShardWriterOptions opts_;
  std::unique_ptr<Impl> impl_;  // connection and prepared statements (writer thread only)

  mutable std::mutex mu_;
  std::condition_variable wake_;  // writer: work is due
  std::condition_variable done_;  // producers: a batch committed / space freed
  Batch pending_;
  uint64_t enqueued_ = 0, committed_ = 0;
  bool flushWanted_ = false, stop_ = false, closed_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace stagescope::storage
