// RecordList: the records of one kind waiting in a ShardWriter batch, in arrival order.
//
// Why not a std::vector: when the recording thread outruns the writer thread (a burst, a slow
// disk) a batch grows, and a vector that grows moves every record it holds into fresh memory
// (page faults included) each time it doubles, on the recording thread.  A RecordList keeps
// records in chunks of kChunk that never move; clear() keeps the memory of up to kKeptChunks
// chunks for the next batch, so a steady stream of records allocates nothing here.
//
// Chunks are contiguous: chunks() hands them out as spans, every one but the last full, so a
// reader can take the records kChunk at a time (kChunk is a multiple of the rows per INSERT).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace stagescope::storage {

template <typename T>
class RecordList {
 public:
  static constexpr size_t kChunk = 1024;     // records per chunk
  static constexpr size_t kKeptChunks = 16;  // chunks whose memory clear() keeps

  void push_back(T&& record) {
    if (used_ == 0 || chunks_[used_ - 1].size() == kChunk) {
      if (used_ == chunks_.size()) {
        chunks_.emplace_back();
        chunks_.back().reserve(kChunk);
      }
      ++used_;
    }
    chunks_[used_ - 1].push_back(std::move(record));
    ++size_;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The chunks in use, in order; each but the last holds exactly kChunk records.
  template <typename F>
  void forEachChunk(F f) const {
    for (size_t i = 0; i < used_; ++i) f(std::span<const T>(chunks_[i]));
  }

  // Destroys the records; keeps the memory of up to kKeptChunks chunks.
  void clear() {
    for (size_t i = 0; i < used_; ++i) chunks_[i].clear();
    used_ = 0;
    size_ = 0;
    if (chunks_.size() > kKeptChunks) chunks_.resize(kKeptChunks);
  }

 private:
  std::vector<std::vector<T>> chunks_;  // [0, used_) in use, the rest empty with capacity
  size_t used_ = 0;
  size_t size_ = 0;
};

}  // namespace stagescope::storage
