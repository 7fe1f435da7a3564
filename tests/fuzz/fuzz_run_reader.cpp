// libFuzzer target for the run-file reader: every input is written to a file and opened with
// storage::loadRun (and the payload reader; and as `compare` loads it).  A RunFileError is the
// expected answer to garbage (the reader's contract, storage/RunReader.h); any other exception, a
// crash, a sanitizer report, a hang or runaway memory is a bug in storage/.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "storage/RunReader.h"
#include "storage/Sqlite.h"

namespace {

std::string inputPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/stagescope-fuzz-" + std::to_string(getpid()) + ".db";
  }();
  return path;
}

void removeFiles(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = inputPath();
  removeFiles(path);
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    stagescope::model::RunModel run = stagescope::storage::loadRun(path);
    for (size_t i = 0; i < run.transferIds.size() && i < 4; ++i) {
      (void)stagescope::storage::loadTransferPayload(path, run.transferIds[i]);
    }
  } catch (const stagescope::storage::RunFileError&) {
    // The one expected answer to garbage.  Any other exception (a bad_alloc from a size the
    // reader trusted, an SqliteError that escaped its translation) is left uncaught: libFuzzer
    // reports it as a crash, with the input that caused it.
  }
  try {
    // What `compare` loads: payloads, and only the gradients it judges (another SQL statement).
    stagescope::storage::LoadOptions compared;
    compared.payloads = true;
    compared.comparedGradients = true;
    (void)stagescope::storage::loadRun(path, compared);
  } catch (const stagescope::storage::RunFileError&) {
  }
  try {
    // The gradients on two threads and connections (LoadOptions::parallelFromRows), which
    // real runs only reach at 2^18 gradient rows: here from two rows on.
    stagescope::storage::LoadOptions parallel;
    parallel.parallelFromRows = 1;
    (void)stagescope::storage::loadRun(path, parallel);
  } catch (const stagescope::storage::RunFileError&) {
  }
  removeFiles(path);
  return 0;
}
