#include "core/analysis/Inputs.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

using model::RunModel;

namespace {

// The extents of one sample of `m` and the dtype its rows carry.
std::vector<int64_t> sampleShape(const ModuleSamples& m) {
  if (m.isLlm()) return {m.textLen + 1};
  return {m.patches, m.patchDim};
}
const char* sampleDtype(const ModuleSamples& m) {
  return m.isLlm() ? "int64" : "float32";
}

std::string where(const RunModel& run, const events::InputRecord& in, int dp) {
  std::ostringstream o;
  o << "rank " << in.rank << " (" << in.module.str() << " dp" << dp;
  if (const auto* r = findRank(run, in.rank, in.module.str())) o << " tp" << r->tp;
  o << ") iteration " << in.iteration << " microbatch " << in.microbatch;
  return o.str();
}

// A sample's values regenerated from the seed, as the bytes a row records (int64 tokens or
// float32 patches); nullopt where the generator path is not ported.
struct Regenerated {
  std::vector<int64_t> tokens;
  std::vector<float> patches;
};
std::optional<Regenerated> regenerate(const SampleLayout& l, const std::string& module,
                                      int iteration, int64_t sample) {
  const ModuleSamples& m = l.modules.at(module);
  Regenerated r;
  if (m.isLlm()) {
    r.tokens = regenerateTokens(l.seed, iteration, sample, m.textLen, m.vocab);
    return r;
  }
  auto p = regeneratePatches(l.seed, iteration, sample, module, m.patches, m.patchDim);
  if (!p) return std::nullopt;
  r.patches = std::move(*p);
  return r;
}

// Whether `bytes` hold the regenerated sample: tokens exactly, patches element-wise within
// kPatchElementTolerance of max(1, |regenerated|).
bool holds(std::span<const uint8_t> bytes, const Regenerated& r) {
  if (!r.tokens.empty()) {
    return bytes.size() == r.tokens.size() * 8 &&
           std::memcmp(bytes.data(), r.tokens.data(), bytes.size()) == 0;
  }
  if (bytes.size() != r.patches.size() * 4) return false;
  for (size_t i = 0; i < r.patches.size(); ++i) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    const double want = r.patches[i];
    if (!(std::fabs(v - want) <= kPatchElementTolerance * std::max(1.0, std::fabs(want))))
      return false;
  }
  return true;
}

// Which global sample of the iteration the bytes hold, -1 when none of the first 4096.
int64_t identify(const SampleLayout& l, const std::string& module, int iteration,
                 std::span<const uint8_t> bytes) {
  for (int64_t s = 0; s < std::min<int64_t>(l.globalBatch, 4096); ++s) {
    auto r = regenerate(l, module, iteration, s);
    if (r && holds(bytes, *r)) return s;
  }
  return -1;
}

// The rows a completed level-full run must hold that it lacks.
void countExpectedRows(const RunModel& run, const SampleLayout& l, const RecordFilter& filter,
                       InputsReport& rep) {
  if (run.info.level != events::RecordLevel::Full ||
      run.info.status != events::RunStatus::Completed || run.partial)
    return;
  std::set<std::tuple<int, std::string, int, int>> have;  // rank, module, iteration, microbatch
  for (const auto& in : run.inputs)
    have.emplace(in.rank, in.module.str(), in.iteration, in.microbatch);
  for (const auto& r : run.ranks) {
    if (r.pp != 0 || !l.modules.count(r.module)) continue;
    for (int it = 0; it < run.info.iterations; ++it) {
      if (!filter.wants(it, r.module, r.rank)) continue;
      for (int mb = 0; mb < l.microbatches; ++mb) {
        ++rep.rowsExpected;
        if (have.count({r.rank, r.module, it, mb})) continue;
        rep.missingRows.push_back("input of " + r.module + " iteration " + std::to_string(it) +
                                  " microbatch " + std::to_string(mb) + ": no row from rank " +
                                  std::to_string(r.rank) + " (" + r.module + " dp" +
                                  std::to_string(r.dp) + " tp" + std::to_string(r.tp) + ")");
      }
    }
  }
}

}  // namespace

std::span<const uint8_t> sampleBytes(const events::InputRecord& in, int index) {
  const auto& shape = in.shape.vec();
  if (in.payload.empty() || shape.empty() || shape[0] <= 0) return {};
  const auto count = static_cast<size_t>(shape[0]);
  if (in.payload.size() % count != 0 || index < 0 || static_cast<size_t>(index) >= count) return {};
  const size_t each = in.payload.size() / count;
  return {in.payload.data() + each * static_cast<size_t>(index), each};
}

InputSamples inputSamplesOf(const RunModel& run, const SampleLayout& l) {
  InputSamples out;
  for (size_t i = 0; i < run.inputs.size(); ++i) {
    const auto& in = run.inputs[i];
    const std::string module = in.module.str();
    const auto* rank = findRank(run, in.rank, module);
    auto m = l.modules.find(module);
    const auto& shape = in.shape.vec();
    if (!rank || m == l.modules.end()) {
      out.unplaced.push_back("rank " + std::to_string(in.rank) + " " + module + " iteration " +
                             std::to_string(in.iteration) + " microbatch " +
                             std::to_string(in.microbatch) +
                             ": the layout has no such module on that rank");
      continue;
    }
    std::vector<int64_t> want = {m->second.perReplica};
    for (int64_t d : sampleShape(m->second)) want.push_back(d);
    if (shape != want || in.dtype.str() != sampleDtype(m->second)) {
      std::ostringstream o;
      o << where(run, in, rank->dp) << ": " << in.dtype.str() << " [";
      for (size_t k = 0; k < shape.size(); ++k) o << (k ? ", " : "") << shape[k];
      o << "], the layout assigns " << sampleDtype(m->second) << " [";
      for (size_t k = 0; k < want.size(); ++k) o << (k ? ", " : "") << want[k];
      o << "] (" << want[0] << " samples per replica)";
      out.unplaced.push_back(o.str());
      continue;
    }
    const int64_t first = l.firstSample(module, rank->dp, in.microbatch);
    for (int k = 0; k < m->second.perReplica; ++k)
      out.samples.push_back({i, rank->dp, first + k, k});
  }
  return out;
}

std::string InputsReport::summary() const {
  if (!notJudged.empty()) return "inputs not judged: " + notJudged;
  std::ostringstream o;
  o << "inputs: " << rows << " rows against the samples the layout assigns, " << samplesJudged
    << " samples regenerated from the seed and compared";
  if (samplesNotRegenerated)
    o << ", " << samplesNotRegenerated
      << " not regenerated (no payload, or patches of fewer than 16 values)";
  if (!mismatches.empty()) o << ", " << mismatches.size() << " rows hold other samples";
  return o.str();
}

InputsReport inputRowCoverage(const RunModel& run, const RecordFilter& filter) {
  InputsReport rep;
  const SampleLayout l = sampleLayoutOf(run);
  if (l.known) countExpectedRows(run, l, filter, rep);
  return rep;
}

InputsReport judgeInputs(const RunModel& run) {
  InputsReport rep;
  const SampleLayout l = sampleLayoutOf(run);
  if (!l.known) {
    if (!run.inputs.empty()) rep.notJudged = l.why;
    return rep;
  }
  const InputSamples placed = inputSamplesOf(run, l);
  for (const auto& u : placed.unplaced) {
    rep.mismatches.push_back("inputs: " + u);
    rep.mismatchRanks.push_back(-1);
    rep.mismatchIterations.push_back(-1);
  }
  std::set<size_t> rows, wrongRows;
  for (const auto& s : placed.samples) {
    rows.insert(s.row);
    const auto& in = run.inputs[s.row];
    const auto bytes = sampleBytes(in, s.index);
    const std::string module = in.module.str();
    auto r = bytes.empty() ? std::nullopt : regenerate(l, module, in.iteration, s.sample);
    if (!r) {
      ++rep.samplesNotRegenerated;
      continue;
    }
    ++rep.samplesJudged;
    if (holds(bytes, *r) || wrongRows.count(s.row)) continue;
    wrongRows.insert(s.row);
    const int64_t actual = identify(l, module, in.iteration, bytes);
    std::ostringstream o;
    o << "inputs: " << where(run, in, s.dp) << ", sample " << s.index << " of the row: the layout "
      << "assigns global sample " << s.sample << ", the row holds "
      << (actual >= 0 ? "global sample " + std::to_string(actual)
                      : std::string("no sample of its iteration's global batch"))
      << " (" << (r->tokens.empty() ? "patches" : "tokens") << " regenerated from seed " << l.seed
      << ")";
    rep.mismatches.push_back(o.str());
    rep.mismatchRanks.push_back(in.rank);
    rep.mismatchIterations.push_back(in.iteration);
  }
  rep.rows = rows.size();
  return rep;
}

}  // namespace stagescope::analysis
