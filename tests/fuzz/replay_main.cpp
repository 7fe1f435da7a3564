// Replays inputs through the libFuzzer entry point of fuzz_run_reader.cpp without libFuzzer:
// `fuzz_corpus_replay FILE_OR_DIR...` feeds every file (directories: every regular file in them,
// sorted) to LLVMFuzzerTestOneInput, so the seed corpus and any saved crash input run in the
// suite, in the sanitizer build under ASan + UBSan.  An uncaught exception or a sanitizer report
// fails it; it prints how many inputs ran.  Exit 2 when an argument cannot be read.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputsOf(const std::vector<std::string>& args) {
  std::vector<fs::path> files;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<fs::path> in;
      for (const auto& e : fs::directory_iterator(a, ec))
        if (e.is_regular_file()) in.push_back(e.path());
      std::sort(in.begin(), in.end());
      files.insert(files.end(), in.begin(), in.end());
    } else {
      files.emplace_back(a);
    }
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const auto files = inputsOf(std::vector<std::string>(argv + 1, argv + argc));
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_corpus_replay: no input files (expected files or directories)\n");
    return 2;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_corpus_replay: %s: cannot be read\n", f.c_str());
      return 2;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_corpus_replay: %zu inputs read without a crash\n", files.size());
  return 0;
}
