// The checksum of recorded tensor bytes, and the FNV-1a hash of text keys.
//
// Contract (docs/run-file.md "Checksums"): every `checksum` column of a format-2 run file holds
// XXH3-64 (seed 0, the specification's default secret) of the tensor's raw contiguous bytes,
// so any outside tool (`xxhsum -H3`, Python's `xxhash.xxh3_64`) can verify it.  XXH3 was
// chosen over FNV-1a 64 for speed: on a 4 MiB buffer it measured ~22 GB/s against FNV-1a's
// ~0.2 GB/s on this project's 2-core machine when the choice was made, and the engine checksums every
// transfer on both sides.  Format-1 files hold a different, non-standard function (FNV-1a 64
// with a wrong offset basis); their checksums are labelled `fnv1a64_legacy` and must never be
// compared with format-2 checksums (see sameChecksumFunction in core/model/RunModel.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stagescope::events {

// Which function produced the checksum columns of a run.
enum class ChecksumFunction : uint8_t {
  Xxh3_64 = 0,        // XXH3-64, seed 0 (format 2 and later)
  LegacyFnv1a64 = 1,  // format 1: FNV-1a 64 with offset basis 1469598103934665603 (non-standard)
};
const char* toString(ChecksumFunction f);  // "xxh3_64" | "fnv1a64_legacy"
bool parseChecksumFunction(std::string_view text, ChecksumFunction* out);

// The function this build records.
constexpr ChecksumFunction kRecordedChecksum = ChecksumFunction::Xxh3_64;

// XXH3-64 (seed 0) of `bytes` bytes at `data` (data may be null when bytes == 0).
uint64_t checksumBytes(const void* data, size_t bytes);

// FNV-1a 64 with the standard offset basis and prime, for short text keys (initial-weight
// generator seeds, the config hash): layout independent and trivially reimplemented.
constexpr uint64_t kFnv1a64OffsetBasis = 14695981039346656037ull;
constexpr uint64_t kFnv1a64Prime = 1099511628211ull;
constexpr uint64_t fnv1a64(std::string_view text, uint64_t basis = kFnv1a64OffsetBasis) {
  uint64_t h = basis;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * kFnv1a64Prime;
  return h;
}

}  // namespace stagescope::events
