#include "core/events/Checksum.h"

// Header-only use of the xxHash library (the Debian package's xxhash.h; no link dependency).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace stagescope::events {

const char* toString(ChecksumFunction f) {
  return f == ChecksumFunction::Xxh3_64 ? "xxh3_64" : "fnv1a64_legacy";
}

bool parseChecksumFunction(std::string_view text, ChecksumFunction* out) {
  for (auto f : {ChecksumFunction::Xxh3_64, ChecksumFunction::LegacyFnv1a64}) {
    if (text == toString(f)) {
      *out = f;
      return true;
    }
  }
  return false;
}

uint64_t checksumBytes(const void* data, size_t bytes) {
  return XXH3_64bits(data, bytes);
}

}  // namespace stagescope::events
