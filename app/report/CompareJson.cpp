// The JSON comparison report: every number of the analysis::Comparison, for scripts and CI.
#include <cmath>

#include <nlohmann/json.hpp>

#include "app/report/CompareReport.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using namespace analysis;

namespace {
// JSON has no NaN/Inf: a non-finite value is written as the string "NaN", "Infinity" or
// "-Infinity" (never null, never 0), so a reader sees what the run recorded.
nlohmann::json num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

nlohmann::json summaryJson(const RunSummary& s) {
  nlohmann::json j = {{"label", s.label},
                      {"path", s.path},
                      {"run_id", s.runId},
                      {"status", s.status},
                      {"status_reason", s.statusReason},
                      {"config_hash", s.configHash},
                      {"level", s.level},
                      {"world_size", s.worldSize},
                      {"iterations", s.iterations},
                      {"microbatches", s.microbatches},
                      {"layout", s.layout},
                      {"events", s.events}};
  j["step_ms"] = {{"median", s.time.medianStepMs},
                  {"mean", s.time.meanStepMs},
                  {"per_iteration", s.time.stepMs}};
  j["bubble"] = {{"measured", s.time.measuredBubble},
                 {"expected", s.time.expectedBubble},
                 {"stages", s.time.stages},
                 {"microbatches", s.time.microbatches}};
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : s.time.ranks) {
    j["ranks"].push_back({{"rank", r.rank},
                          {"module", r.module},
                          {"tp", r.tp},
                          {"pp", r.pp},
                          {"dp", r.dp},
                          {"forward_ms", r.forwardMs},
                          {"backward_ms", r.backwardMs},
                          {"comm_ms", r.commMs},
                          {"other_ms", r.otherMs},
                          {"idle_ms", r.idleMs},
                          {"bubble", r.bubble}});
  }
  return j;
}

nlohmann::json sideJson(const TransferSideInfo& s) {
  if (!s.present) return nullptr;
  nlohmann::json j = {
      {"src_rank", s.srcRank}, {"dst_rank", s.dstRank}, {"shape", s.shape}, {"dtype", s.dtype}};
  j["checksums"] = nlohmann::json::array();
  for (auto v : s.checksums) j["checksums"].push_back(formatChecksum(v));
  if (s.hasStats) {
    j["stats"] = {{"min", num(s.stats.min)}, {"max", num(s.stats.max)}, {"mean", num(s.stats.mean)},
                  {"l2", num(s.stats.l2)},   {"nan", s.stats.nanCount}, {"inf", s.stats.infCount},
                  {"numel", s.stats.numel}};
  }
  return j;
}

nlohmann::json gradJson(const GradRow& g) {
  return {{"param", g.param},
          {"iteration", g.iteration},
          {"norm_a", num(g.normA)},
          {"norm_b", num(g.normB)},
          {"rel_diff", num(g.relDiff)},
          {"bitwise_equal", g.bitwiseEqual},
          {"how", g.how}};
}
}  // namespace

std::string renderJson(const Comparison& c) {
  nlohmann::json j;
  j["verdict"] = toString(c.verdict);
  j["verdict_reason"] = c.verdictReason;
  j["exit_code"] = exitCodeOf(c.verdict);
  j["evidence"] = c.evidence;
  j["tolerance_rule"] = c.toleranceRule;
  j["missing"] = c.missing;
  j["coverage"] = {{"a", c.coverageA.summary()}, {"b", c.coverageB.summary()}};
  if (c.first) {
    const auto& d = *c.first;
    j["first_divergence"] = {
        {"kind", toString(d.kind)},
        {"key", d.key},
        {"iteration", d.iteration},
        {"microbatch", d.microbatch},
        {"edge", d.edge},
        {"direction", d.kind == ItemKind::Transfer ? toString(d.direction) : ""},
        {"param", d.param},
        {"state", toString(d.state)},
        {"evidence", toString(d.evidence)},
        {"distance", num(d.distance)},
        {"tolerance", num(d.tolerance)},
        {"text", c.firstText}};
    if (d.kind == ItemKind::Input) {  // the sample that differs (Samples.h)
      j["first_divergence"]["module"] = d.module;
      j["first_divergence"]["sample"] = d.sample;
    }
  } else {
    j["first_divergence"] = nullptr;
  }
  j["a"] = summaryJson(c.a);
  j["b"] = summaryJson(c.b);
  j["config_equal"] = c.configEqual;
  j["schedule"] = {{"compared", c.schedule.compared},
                   {"ranks_compared", c.schedule.ranksCompared},
                   {"ranks_differing", c.schedule.ranksDiffering},
                   {"text", c.schedule.describe(c.a.label, c.b.label)}};
  if (c.schedule.differs()) {
    j["schedule"]["first"] = {{"rank", c.schedule.rank},
                              {"iteration", c.schedule.iteration},
                              {"position", c.schedule.position},
                              {"a", c.schedule.opA},
                              {"b", c.schedule.opB}};
  }
  j["gradient_ratios"] = c.gradientRatios;
  j["capture_against_plan"] = c.captureAgainstPlan;
  j["config_diff"] = nlohmann::json::array();
  for (const auto& l : c.configDiff) {
    if (l.op != ' ') j["config_diff"].push_back(std::string(1, l.op) + l.text);
  }
  j["losses"] = {{"compared", c.lossesCompared},
                 {"differing", c.lossesDiffering},
                 {"within_tolerance", c.lossesWithinTolerance},
                 {"only_one_side", c.lossesOnlyOne},
                 {"max_rel_diff", num(c.maxLossRelDiff)}};
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.losses) {
    rows.push_back({{"iteration", r.iteration},
                    {"microbatch", r.microbatch},
                    {"dp", r.dp},
                    {"a", r.hasA ? num(r.a) : nullptr},
                    {"b", r.hasB ? num(r.b) : nullptr},
                    {"diff", num(r.diff)}});
  }
  j["losses"]["rows"] = std::move(rows);
  nlohmann::json ia = nlohmann::json::array(), ib = nlohmann::json::array();
  for (double v : c.iterLossA) ia.push_back(num(v));
  for (double v : c.iterLossB) ib.push_back(num(v));
  j["losses"]["per_iteration_a"] = ia;
  j["losses"]["per_iteration_b"] = ib;
  j["gradients"] = {{"compared", c.gradsCompared},
                    {"differing", c.gradsDiffering},
                    {"within_tolerance", c.gradsWithinTolerance},
                    {"only_one_side", c.gradsOnlyOne},
                    {"max_rel_diff", num(c.maxGradRelDiff)},
                    {"total_norm_a", c.totalNormA},
                    {"total_norm_b", c.totalNormB}};
  j["gradients"]["top"] = nlohmann::json::array();
  for (const auto& g : c.gradTop) j["gradients"]["top"].push_back(gradJson(g));
  j["gradients"]["last_iteration"] = nlohmann::json::array();
  for (const auto& g : c.gradLast) j["gradients"]["last_iteration"].push_back(gradJson(g));
  j["transfers"] = {{"comparable", c.transfersComparable},
                    {"compared", c.transfersCompared},
                    {"differing", c.transfersDiffering},
                    {"only_a", c.transfersOnlyA},
                    {"only_b", c.transfersOnlyB}};
  if (c.firstDivergent) {
    const auto& d = *c.firstDivergent;
    j["transfers"]["first_divergent"] = {{"edge", d.edge},
                                         {"direction", toString(d.direction)},
                                         {"iteration", d.iteration},
                                         {"microbatch", d.microbatch},
                                         {"src_dp", d.srcDp},
                                         {"reason", d.reason},
                                         {"a", sideJson(d.a)},
                                         {"b", sideJson(d.b)},
                                         {"rel_diff", num(d.relDiff)},
                                         {"max_abs_diff", num(d.maxAbsDiff)}};
  } else {
    j["transfers"]["first_divergent"] = nullptr;
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void writeJson(const Comparison& c, const std::string& path) {
  writeTextFile(path, renderJson(c));
}

}  // namespace stagescope::report
