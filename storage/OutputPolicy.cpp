#include "storage/OutputPolicy.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/events/Printable.h"
#include "storage/LiveShards.h"
#include "storage/Merge.h"
#include "storage/RunFileError.h"
#include "storage/Schema.h"
#include "storage/TextFile.h"

namespace stagescope::storage {
namespace {

namespace fs = std::filesystem;

std::string head(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text(bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return text;
}

bool startsWith(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

// A JSON object holding all of `keys` (the file is read whole; reports are small).
bool jsonObjectWith(const std::string& path, std::initializer_list<const char*> keys) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size > (uint64_t{256} << 20)) return false;
  std::ifstream in(path, std::ios::binary);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  for (const char* k : keys) {
    if (!j.contains(k)) return false;
  }
  return true;
}

bool isReportOfKind(const std::string& path, ReportKind kind) {
  const std::string h = head(path, 4096);
  switch (kind) {
    case ReportKind::CompareHtml:
      return startsWith(h, "<!DOCTYPE html>") && h.find("<title>stagescope compare") != h.npos;
    case ReportKind::CompareMarkdown:
      return startsWith(h, "## stagescope compare");
    case ReportKind::CompareJson:
      return startsWith(h, "{") && jsonObjectWith(path, {"verdict", "a", "b"});
    case ReportKind::CheckJUnit:
      return startsWith(h, "<?xml") && h.find("<testsuites name=\"stagescope\"") != h.npos;
    case ReportKind::CheckJson:
      return startsWith(h, "{") && jsonObjectWith(path, {"checks", "run_id", "exit_code"});
    case ReportKind::ChromeTrace:
      return startsWith(h, "{\"displayTimeUnit\":") &&
             h.find("\"otherData\":{\"run_id\"") != h.npos;
    case ReportKind::Screenshot: {
      // A PNG whose first chunk after IHDR is the tEXt "Software" = "stagescope viewer" that
      // ui/ScreenshotFile writes: a user's other images are never replaced.
      static const std::string kMark = std::string("tEXtSoftware") + '\0' + "stagescope viewer";
      return h.size() >= 8 && h.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0 &&
             h.compare(37, kMark.size(), kMark) == 0;
    }
    case ReportKind::ScreenshotProbes:
      return startsWith(h, "timeline ");
  }
  return false;
}

// Lexically normalised absolute path, for comparing paths that may not exist.
fs::path normal(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return (ec ? fs::path(path) : p).lexically_normal();
}

bool samePath(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return normal(a) == normal(b);
}

enum class Existing { None, EmptyFile, File };

// The checks every output shares: not an input, not a directory, link or special file.
Existing checkCommon(const std::string& flag, const std::string& path,
                     const std::vector<std::string>& inputs, const std::string& expected) {
  const std::string what = flag + " " + events::shownValue(path);
  if (path.empty()) throw OutputRefused(flag + ": empty path; expected " + expected);
  if (path.back() == '/') {
    throw OutputRefused(what + ": ends with '/' (a directory); expected " + expected);
  }
  for (const auto& in : inputs) {
    if (!in.empty() && samePath(path, in)) {
      throw OutputRefused(what + ": is an input of this command (" + in + "); expected " +
                          expected + " at another path");
    }
  }
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw OutputRefused(what + ": " + ec.message() + "; expected " + expected);
  }
  switch (st.type()) {
    case fs::file_type::not_found:
      return Existing::None;
    case fs::file_type::regular:
      return fs::file_size(path, ec) == 0 && !ec ? Existing::EmptyFile : Existing::File;
    case fs::file_type::directory:
      throw OutputRefused(what + ": is a directory; expected " + expected);
    case fs::file_type::symlink:
      throw OutputRefused(what + ": is a symbolic link; expected " + expected +
                          " (give the path of the file itself)");
    default:
      throw OutputRefused(what + ": is a special file (device, FIFO or socket); expected " +
                          expected);
  }
}

}  // namespace

const char* describe(ReportKind kind) {
  switch (kind) {
    case ReportKind::CompareHtml:
      return "a compare HTML report";
    case ReportKind::CompareMarkdown:
      return "a compare Markdown report";
    case ReportKind::CompareJson:
      return "a compare JSON report";
    case ReportKind::CheckJUnit:
      return "a check JUnit report";
    case ReportKind::CheckJson:
      return "a check JSON report";
    case ReportKind::ChromeTrace:
      return "a Chrome trace";
    case ReportKind::Screenshot:
      return "a stagescope viewer screenshot (PNG)";
    case ReportKind::ScreenshotProbes:
      return "a viewer screenshot's .probes file";
  }
  return "a report";
}

bool isStagescopeFile(const std::string& path) {
  const std::string h = head(path, 100);
  if (h.size() < 100 || std::memcmp(h.data(), "SQLite format 3", 16) != 0) return false;
  // PRAGMA application_id: big-endian 32-bit integer at byte offset 68 of the header.
  const auto b = [&](int i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(h[68 + i]));
  };
  const uint32_t id = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
  return id == static_cast<uint32_t>(storage::kApplicationId);
}

bool isRunFile(const std::string& path) {
  if (!isStagescopeFile(path)) return false;
  storage::checkCompanions(path);  // a FIFO named like its journal: say so, never open it
  try {
    storage::Db db = storage::openStagescopeFile(path, /*writable=*/false);
    return db.hasTable("shards");
  } catch (const storage::RunFileError& e) {
    if (e.kind() == storage::RunFileError::Kind::Busy) throw;  // not "not a run file"
    std::error_code ec;
    return fs::exists(path + "-journal", ec);
  } catch (const std::exception&) {
    // Ours by its header, but a read-only open cannot get past the hot journal of a writer that
    // died mid-transaction: a writer (merge, run --force) rolls it back.
    std::error_code ec;
    return fs::exists(path + "-journal", ec);
  }
}

void createParentDirectories(const std::string& path) {
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      throw std::runtime_error(path + ": cannot create its directory " + parent.string() + ": " +
                               ec.message());
    }
  }
  // Found out now, not after a long load with the report half printed.
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error(path + ": cannot write in " + parent.string() + ": " +
                             std::strerror(errno));
  }
}

bool acceptsStandardOutput(ReportKind kind) {
  switch (kind) {
    case ReportKind::CompareHtml:
    case ReportKind::CompareMarkdown:
    case ReportKind::CompareJson:
    case ReportKind::CheckJUnit:
    case ReportKind::CheckJson:
      return true;
    case ReportKind::ChromeTrace:
    case ReportKind::Screenshot:
    case ReportKind::ScreenshotProbes:
      return false;
  }
  return false;
}

ClaimedReports claimReportOutputs(const std::vector<ReportOutput>& outputs,
                                  const std::vector<std::string>& inputs) {
  ClaimedReports result;
  const ReportOutput* onStdout = nullptr;
  std::vector<const ReportOutput*> claimed;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    if (report::isStandardOutput(o.path) && acceptsStandardOutput(o.kind)) {
      // Standard output holds one report, alone; no file is involved.
      if (onStdout) {
        throw OutputRefused(o.flag + " -: " + onStdout->flag +
                            " - already writes to standard output; expected a file path for "
                            "all but one report");
      }
      onStdout = &o;
      result.reportOnStandardOutput = true;
      continue;
    }
    const std::string expected = std::string("a new file, an empty file or ") + describe(o.kind);
    for (const auto* earlier : claimed) {
      if (samePath(o.path, earlier->path)) {
        throw OutputRefused(o.flag + " " + events::shownValue(o.path) + ": also given to " +
                            earlier->flag + "; expected a different path for each report");
      }
    }
    if (checkCommon(o.flag, o.path, inputs, expected) == Existing::File &&
        !isReportOfKind(o.path, o.kind)) {
      throw OutputRefused(o.flag + " " + events::shownValue(o.path) + ": exists and is not " +
                          describe(o.kind) +
                          "; stagescope replaces only its own report of the same kind - choose "
                          "another path or remove the file");
    }
    claimed.push_back(&o);
  }
  for (const auto* o : claimed) createParentDirectories(o->path);
  return result;
}

void claimScreenshotOutputs(const std::string& flag, const std::vector<std::string>& pngs,
                            const std::vector<std::string>& inputs) {
  std::vector<ReportOutput> outputs;
  for (const auto& png : pngs) {
    outputs.push_back({flag, png, ReportKind::Screenshot});
    if (!png.empty() && png.back() != '/')
      outputs.push_back({flag, png + ".probes", ReportKind::ScreenshotProbes});
  }
  claimReportOutputs(outputs, inputs);
}

RunOutputPlan checkRunOutput(const std::string& out, const std::vector<std::string>& inputs,
                             bool force, const std::string& flag, bool ownShards) {
  const std::string what = flag + " " + events::shownValue(out);
  const std::string expected =
      "a run file path (a new file, an empty file, or a run file with --force)";
  RunOutputPlan plan;
  switch (checkCommon(flag, out, inputs, expected)) {
    case Existing::None:
      break;
    case Existing::EmptyFile:
      plan.replace.push_back(out);
      break;
    case Existing::File:
      if (!isRunFile(out)) {
        throw OutputRefused(what +
                            ": exists and is not a stagescope run file; stagescope "
                            "replaces nothing else, not even with --force - choose "
                            "another -o or remove the file");
      }
      if (!force) {
        throw OutputRefused(what +
                            ": a run file already exists; pass --force to replace it "
                            "(with its shards), or choose another -o");
      }
      plan.replace.push_back(out);
      break;
  }
  // Companions of the run file: they belong to the run at `out` and go with it.
  std::vector<std::string> companions;
  if (!ownShards) companions = storage::findShards(out);
  for (const char* suffix : {".launcher.shard", ".exits.shard", "-journal", "-wal", "-shm"}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(out + suffix, ec))) companions.push_back(out + suffix);
  }
  // A shard a live process holds open belongs to a run in progress (ranks started with
  // `worker`): named as such, never called foreign, never replaced, not even with --force.
  if (const auto live = liveShards(companions); !live.empty()) {
    throw OutputRefused(
        what + ": " + live.front().path + " is " + describeWriter(live.front()) +
        " (a run in progress at this path" +
        (live.size() > 1 ? ", " + std::to_string(live.size()) + " shards live" : std::string()) +
        "); wait for it to finish, or choose another -o");
  }
  for (const auto& c : companions) {
    const bool shard = c.size() > 6 && c.compare(c.size() - 6, 6, ".shard") == 0;
    const std::string kind = shard ? "a stagescope shard" : "SQLite's journal of the run file";
    checkCommon(flag, c, inputs, kind);
    if (shard && !isStagescopeFile(c)) {
      throw OutputRefused(c + ": is in the way of " + what +
                          " and is not a stagescope shard; "
                          "remove or rename it, or choose another -o");
    }
    if (!force) {
      throw OutputRefused(what + ": " + c + " is left from an earlier run at this path (merge " +
                          "it with `stagescope merge`, or pass --force to replace it, or "
                          "choose another -o)");
    }
    plan.replace.push_back(c);
  }
  return plan;
}

}  // namespace stagescope::storage
