#include "app/report/CompareReport.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/report/ReportFormat.h"
#include "core/events/Printable.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using namespace analysis;

// ---- JSON -----------------------------------------------------------------------------------
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

// ---- Markdown -------------------------------------------------------------------------------
namespace {
constexpr const NumberFormat& fmt = kMarkdownNumbers;  // a NaN reads "-"
// Text from a run file in Markdown: one printable line (events::printableLine: control
// characters and invalid UTF-8 as \xNN, so it can neither break the table nor drive a
// terminal the report is printed to), with '|' escaped.
// Text from the run files (run ids, labels, reasons) in Markdown prose or a table cell: one
// printable line, `|` escaped for tables, and `<` as an entity, so that a run id such as
// `<img src=x onerror=...>` is shown, never rendered live (Markdown passes raw HTML through,
// and no tag opens without `<`).
std::string mdEscape(const std::string& s) {
  std::string o;
  for (char ch : events::printableLine(s)) {
    switch (ch) {
      case '|':
        o += "\\|";
        break;
      case '<':  // enough to keep any tag from opening; '>' (as in "pp0->pp1") stays readable
        o += "&lt;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

// The same text as a code span: Markdown interprets nothing inside one (so no entities, which
// it would show as typed); a backtick, which would end the span, becomes a quote.
std::string mdCode(const std::string& s) {
  std::string o = "`";
  for (char ch : events::printableLine(s)) o += ch == '`' ? '\'' : ch == '|' ? '/' : ch;
  return o + "`";
}
}  // namespace

std::string renderMarkdown(const Comparison& c) {
  std::ostringstream o;
  const char* badge = c.verdict == Verdict::Identical         ? "IDENTICAL"
                      : c.verdict == Verdict::WithinTolerance ? "EQUAL WITHIN TOLERANCE"
                      : c.verdict == Verdict::Incomplete      ? "INCOMPLETE"
                                                              : "DIVERGED";
  o << "## stagescope compare: " << mdCode(c.a.name) << " vs " << mdCode(c.b.name) << "\n\n";
  o << "**Verdict: " << badge << "** — " << mdEscape(c.verdictReason) << "\n\n";
  o << "- Evidence: " << mdEscape(c.evidence) << "\n";
  o << "- Tolerance: " << mdEscape(c.toleranceRule) << "\n";
  o << "- First divergence (causal order): " << (c.first ? mdEscape(c.firstText) : "none") << "\n";
  for (const auto& m : c.missing) o << "- Missing: " << mdEscape(m) << "\n";
  o << "\n";
  o << "| | " << mdEscape(c.a.label) << " | " << mdEscape(c.b.label) << " |\n|---|---|---|\n";
  auto row = [&](const std::string& k, const std::string& x, const std::string& y) {
    o << "| " << k << " | " << mdEscape(x) << " | " << mdEscape(y) << " |\n";
  };
  row("run", c.a.name, c.b.name);
  row("status", c.a.status, c.b.status);
  row("layout", c.a.layout, c.b.layout);
  row("ranks", std::to_string(c.a.worldSize), std::to_string(c.b.worldSize));
  row("iterations x microbatches",
      std::to_string(c.a.iterations) + " x " + std::to_string(c.a.microbatches),
      std::to_string(c.b.iterations) + " x " + std::to_string(c.b.microbatches));
  row("recording level", c.a.level, c.b.level);
  row("events", std::to_string(c.a.events), std::to_string(c.b.events));
  row("step time (median)", fmt.milliseconds(c.a.time.medianStepMs),
      fmt.milliseconds(c.b.time.medianStepMs));
  row("bubble measured / expected",
      fmt.percent(c.a.time.measuredBubble) + " / " + fmt.percent(c.a.time.expectedBubble),
      fmt.percent(c.b.time.measuredBubble) + " / " + fmt.percent(c.b.time.expectedBubble));
  o << "\n";
  // "differ" means beyond the tolerance rule; not bitwise equal but within it is said apart.
  o << "- Messages: " << c.transfersCompared << " compared, " << c.transfersDiffering << " differ, "
    << c.transfersWithinTolerance << " within tolerance, " << c.transfersOnlyA << " only in "
    << c.a.label << ", " << c.transfersOnlyB << " only in " << c.b.label << "\n";
  o << "- Losses: " << c.lossesCompared << " compared, " << c.lossesDiffering << " differ, "
    << c.lossesWithinTolerance << " within tolerance, max relative difference "
    << fmt.difference(c.maxLossRelDiff) << "\n";
  o << "- Gradients: " << c.gradsCompared << " (parameter, iteration) compared, "
    << c.gradsDiffering << " differ, " << c.gradsWithinTolerance
    << " within tolerance, max relative difference " << fmt.difference(c.maxGradRelDiff) << "\n";
  for (const auto& r : c.gradientRatios) o << "- Uniform gradient ratio: " << mdEscape(r) << "\n";
  o << "- Config: " << (c.configEqual ? "identical" : "differs (see below)") << "\n";
  o << "- Schedules: " << c.schedule.describe(c.a.label, c.b.label) << "\n";
  if (!c.captureAgainstPlan.empty())
    o << "- Schedule against the plan: " << mdEscape(c.captureAgainstPlan) << "\n";
  o << "\n";

  if (c.firstDivergent) {
    const auto& d = *c.firstDivergent;
    o << "### First divergent message (causal order)\n\n";
    o << mdCode(d.edge) << " " << toString(d.direction) << ", iteration " << d.iteration
      << ", microbatch " << d.microbatch << " (dp " << d.srcDp
      << "), reason: " << mdEscape(d.reason);
    if (!std::isnan(d.relDiff)) o << ", relative difference " << fmt.difference(d.relDiff);
    o << "\n\n| | " << mdEscape(c.a.label) << " | " << mdEscape(c.b.label) << " |\n|---|---|---|\n";
    auto cs = [](const TransferSideInfo& s) {
      if (!s.present) return std::string("(absent)");
      std::string r;
      for (auto v : s.checksums) r += (r.empty() ? "" : ", ") + formatChecksum(v);
      return r;
    };
    auto ranks = [](const TransferSideInfo& s) {
      return s.present ? std::to_string(s.srcRank) + " -> " + std::to_string(s.dstRank) : "-";
    };
    auto st = [](const TransferSideInfo& s, int which) {
      if (!s.present || !s.hasStats) return std::string("-");
      double v = which == 0 ? s.stats.mean : which == 1 ? s.stats.l2 : s.stats.max;
      return analysis::formatValue(v);
    };
    row("ranks", ranks(d.a), ranks(d.b));
    row("checksum", cs(d.a), cs(d.b));
    row("shape", d.a.present ? formatShape(d.a.shape) + " " + d.a.dtype : "-",
        d.b.present ? formatShape(d.b.shape) + " " + d.b.dtype : "-");
    row("mean", st(d.a, 0), st(d.b, 0));
    row("l2", st(d.a, 1), st(d.b, 1));
    row("max", st(d.a, 2), st(d.b, 2));
    o << "\n";
  }

  if (!c.iterLossA.empty() || !c.iterLossB.empty()) {
    o << "### Loss per iteration (mean over microbatches)\n\n| iteration | " << mdEscape(c.a.label)
      << " | " << mdEscape(c.b.label) << " | difference |\n|---:|---:|---:|---:|\n";
    size_t n = std::max(c.iterLossA.size(), c.iterLossB.size());
    for (size_t i = 0; i < n && i < 50; ++i) {
      bool hasX = i < c.iterLossCountA.size() && c.iterLossCountA[i] > 0;
      bool hasY = i < c.iterLossCountB.size() && c.iterLossCountB[i] > 0;
      double x = hasX ? c.iterLossA[i] : NAN, y = hasY ? c.iterLossB[i] : NAN;
      o << "| " << i << " | " << (hasX ? analysis::formatValue(x, 9) : "-") << " | "
        << (hasY ? analysis::formatValue(y, 9) : "-") << " | "
        << (hasX && hasY ? analysis::formatValue(y - x, 3) : "-") << " |\n";
    }
    if (n > 50) o << "| ... | | | |\n";
    o << "\n";
  }
  if (!c.gradTop.empty()) {
    o << "### Gradient norms that differ most\n\n| parameter | iteration | " << mdEscape(c.a.label)
      << " | " << mdEscape(c.b.label) << " | rel. diff |\n|---|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < c.gradTop.size() && i < 10; ++i) {
      const auto& g = c.gradTop[i];
      o << "| " << mdCode(g.param) << " | " << g.iteration << " | "
        << (g.hasA ? analysis::formatValue(g.normA) : "-") << " | "
        << (g.hasB ? analysis::formatValue(g.normB) : "-") << " | " << fmt.difference(g.relDiff)
        << " |\n";
    }
    o << "\n";
  }
  o << "<details><summary>Time per rank</summary>\n\n";
  for (const auto* s : {&c.a, &c.b}) {
    o << "**" << mdEscape(s->label) << "** (" << mdCode(s->name) << ")\n\n"
      << "| rank | module | tp/pp/dp | forward ms | backward ms | comm ms | other ms | idle ms | "
         "bubble |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& r : s->time.ranks) {
      o << "| " << r.rank << " | " << mdEscape(r.module) << " | " << r.tp << "/" << r.pp << "/"
        << r.dp << " | " << fmt(r.forwardMs, "%.2f") << " | " << fmt(r.backwardMs, "%.2f") << " | "
        << fmt(r.commMs, "%.2f") << " | " << fmt(r.otherMs, "%.2f") << " | "
        << fmt(r.idleMs, "%.2f") << " | " << fmt.percent(r.bubble) << " |\n";
    }
    o << "\n";
  }
  o << "</details>\n\n";
  if (!c.configEqual) {
    o << "<details><summary>Config diff</summary>\n\n```diff\n";
    for (const auto& l : c.configDiff) {
      if (l.op != ' ') o << l.op << events::printableLine(l.text) << "\n";
    }
    o << "```\n\n</details>\n";
  }
  return o.str();
}

void writeMarkdown(const Comparison& c, const std::string& path) {
  writeTextFile(path, renderMarkdown(c));
}

}  // namespace stagescope::report
