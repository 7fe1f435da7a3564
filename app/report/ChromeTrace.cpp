#include "app/report/ChromeTrace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "app/report/Escape.h"
#include "app/report/TextFile.h"
#include "core/analysis/Analysis.h"

namespace stagescope::report {

using events::ActionKind;
using model::RunModel;
using namespace analysis;

namespace {

// A buffered writer over stdio (much faster than building a DOM for millions of events).
class Out {
 public:
  explicit Out(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw std::runtime_error("cannot write '" + path + "': could not open the file");
    buf_.reserve(1 << 20);
  }
  ~Out() {
    if (f_) std::fclose(f_);
  }
  Out& operator<<(const std::string& s) {
    buf_ += s;
    spill();
    return *this;
  }
  Out& operator<<(const char* s) {
    buf_ += s;
    spill();
    return *this;
  }
  Out& num(int64_t v) {
    buf_ += std::to_string(v);
    return *this;
  }
  Out& us(int64_t ns) {  // microseconds with ns precision
    char b[40];
    std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000),
                  static_cast<long long>(std::llabs(ns % 1000)));
    if (ns < 0 && ns > -1000) buf_ += "-";
    buf_ += b;
    return *this;
  }
  Out& real(double v) {
    if (!std::isfinite(v)) {
      buf_ += std::isnan(v) ? "\"NaN\"" : (v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      return *this;
    }
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", v);
    buf_ += b;
    return *this;
  }
  Out& str(const std::string& s) {
    buf_ += '"';
    buf_ += jsonEscape(s);
    buf_ += '"';
    return *this;
  }
  void event() {  // separator between events
    if (!first_) buf_ += ",\n";
    first_ = false;
  }
  void close() {
    flush();
    if (std::fclose(f_) != 0) {
      f_ = nullptr;
      throw std::runtime_error("cannot write '" + path_ + "': close failed");
    }
    f_ = nullptr;
  }

 private:
  void spill() {
    if (buf_.size() > (1 << 20)) flush();
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
      throw std::runtime_error("cannot write '" + path_ + "': write failed");
    }
    buf_.clear();
  }
  std::string path_;
  FILE* f_;
  std::string buf_;
  bool first_ = true;
};

const char* category(ActionKind k) {
  switch (k) {
    case ActionKind::Forward:
    case ActionKind::Backward:
      return "compute";
    case ActionKind::DpReduce:
    case ActionKind::OptimizerStep:
      return "optimizer";
    default:
      return "comm";
  }
}

}  // namespace

ChromeTraceStats writeChromeTrace(const RunModel& run, const std::string& path) {
  ChromeTraceStats st;
  Out o(path);
  // Module -> pid.
  std::map<std::string, int> pid;
  for (size_t i = 0; i < run.info.modules.size(); ++i) {
    pid[run.info.modules[i].name] = static_cast<int>(i) + 1;
  }
  auto pidOf = [&](int rank) {
    const auto* info = findRank(run, rank);
    std::string m = info ? info->module : "";
    auto it = pid.find(m);
    if (it == pid.end()) it = pid.emplace(m, static_cast<int>(pid.size()) + 1).first;
    return it->second;
  };
  // The reader already put every time on rank 0's clock (LoadOptions::applyClockOffsets);
  // subtracting RankInfo::clockOffsetNs again here would count it twice.
  auto offsetOf = [](int) { return int64_t{0}; };
  int64_t t0 = INT64_MAX;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    for (const auto& a : run.actions[r]) {
      t0 = std::min(t0, a.startNs - offsetOf(static_cast<int>(r)));
    }
  }
  if (t0 == INT64_MAX) t0 = 0;

  o << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"run_id\":";
  o.str(run.info.runId) << ",\"status\":";
  o.str(toString(run.info.status)) << ",\"status_reason\":";
  o.str(run.info.statusReason) << ",\"config_hash\":";
  o.str(run.info.configHash) << ",\"level\":";
  o.str(toString(run.info.level)) << ",\"world_size\":";
  o.num(run.info.worldSize) << "},\n\"traceEvents\":[\n";

  // Metadata: processes (modules) and threads (ranks).
  for (const auto& m : run.info.modules) {
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
    o.num(pid[m.name]) << ",\"tid\":0,\"args\":{\"name\":";
    o.str("module " + m.name + " (" + m.kind + ", tp" + std::to_string(m.tp) + " pp" +
          std::to_string(m.pp) + " dp" + std::to_string(m.dp) + ")")
        << "}}";
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
    o.num(pid[m.name]) << ",\"tid\":0,\"args\":{\"sort_index\":";
    o.num(pid[m.name]) << "}}";
    st.metadata += 2;
  }
  for (size_t r = 0; r < std::max(run.ranks.size(), run.actions.size()); ++r) {
    int rank = static_cast<int>(r);
    const auto* info = findRank(run, rank);
    std::string name = "rank " + std::to_string(rank);
    int sort = rank;
    if (info) {
      name += " tp" + std::to_string(info->tp) + " pp" + std::to_string(info->pp) + " dp" +
              std::to_string(info->dp);
      if (info->cp) name += " cp" + std::to_string(info->cp);
      name += " (stage " + std::to_string(info->globalStage) + ", " + info->device + ")";
      sort = info->globalStage * 100000 + rank;
    }
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
    o.num(pidOf(rank)) << ",\"tid\":";
    o.num(rank) << ",\"args\":{\"name\":";
    o.str(name) << "}}";
    o.event();
    o << "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":";
    o.num(pidOf(rank)) << ",\"tid\":";
    o.num(rank) << ",\"args\":{\"sort_index\":";
    o.num(sort) << "}}";
    st.metadata += 2;
  }

  // Actions.
  for (size_t r = 0; r < run.actions.size(); ++r) {
    int rank = static_cast<int>(r);
    int p = pidOf(rank);
    int64_t off = offsetOf(rank);
    for (const auto& a : run.actions[r]) {
      std::string name = toString(a.kind);
      if (a.microbatch >= 0) name += " mb" + std::to_string(a.microbatch);
      o.event();
      o << "{\"ph\":\"X\",\"cat\":\"";
      o << category(a.kind) << "\",\"name\":";
      o.str(name) << ",\"pid\":";
      o.num(p) << ",\"tid\":";
      o.num(rank) << ",\"ts\":";
      o.us(a.startNs - off - t0) << ",\"dur\":";
      o.us(std::max<int64_t>(a.endNs - a.startNs, 0)) << ",\"args\":{\"iteration\":";
      o.num(a.iteration) << ",\"seq\":";
      o.num(a.seq) << ",\"microbatch\":";
      o.num(a.microbatch) << ",\"module\":";
      o.str(a.module) << ",\"stage\":";
      o.num(a.stage) << ",\"peers\":[";
      for (size_t i = 0; i < a.peers.size(); ++i) {
        if (i) o << ",";
        o.num(a.peers[i]);
      }
      o << "]}}";
      ++st.slices;
    }
  }

  // Transfers (nested slices clamped into their action) and flows.
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  // The time a transfer's slice spans, clamped into its action's slice.
  auto span = [&](const events::TransferRecord& t, int64_t* s, int64_t* e) {
    int64_t ai = findAction(run, t.rank, t.iteration, t.actionSeq);
    int64_t off = offsetOf(t.rank);
    int64_t ts = t.startNs, te = t.endNs;
    if (ai >= 0) {
      const auto& a = run.actions[t.rank][ai];
      if (ts == 0 && te == 0) ts = a.startNs, te = a.endNs;
      ts = std::clamp(ts, a.startNs, a.endNs);
      te = std::clamp(te, ts, a.endNs);
    }
    *s = ts - off - t0;
    *e = std::max(te, ts) - off - t0;
    return ai >= 0 || t.startNs != 0;
  };
  for (const auto& t : run.transfers) {
    int64_t s, e;
    if (!span(t, &s, &e)) continue;
    o.event();
    o << "{\"ph\":\"X\",\"cat\":\"transfer\",\"name\":";
    o.str(std::string(t.side == events::Side::Send ? "send " : "recv ") +
          (t.direction == events::Direction::Activation ? "act " : "grad ") + t.edge)
        << ",\"pid\":";
    o.num(pidOf(t.rank)) << ",\"tid\":";
    o.num(t.rank) << ",\"ts\":";
    o.us(s) << ",\"dur\":";
    o.us(e - s) << ",\"args\":{\"edge\":";
    o.str(t.edge) << ",\"direction\":";
    o.str(toString(t.direction)) << ",\"src\":";
    o.num(t.srcRank) << ",\"dst\":";
    o.num(t.dstRank) << ",\"iteration\":";
    o.num(t.iteration) << ",\"microbatch\":";
    o.num(t.microbatch) << ",\"shape\":";
    o.str(formatShape(t.shape)) << ",\"dtype\":";
    o.str(t.dtype) << ",\"bytes\":";
    o.num(t.bytes) << ",\"checksum\":";
    o.str(formatChecksum(t.checksum));
    if (t.hasStats) {
      o << ",\"min\":";
      o.real(t.stats.min) << ",\"max\":";
      o.real(t.stats.max) << ",\"mean\":";
      o.real(t.stats.mean) << ",\"l2\":";
      o.real(t.stats.l2) << ",\"nan\":";
      o.num(t.stats.nanCount) << ",\"inf\":";
      o.num(t.stats.infCount);
    }
    o << "}}";
    ++st.transfers;
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[p.send];
    const auto& v = run.transfers[p.recv];
    int64_t ss, se, vs, ve;
    if (!span(s, &ss, &se) || !span(v, &vs, &ve)) continue;
    std::string name =
        s.edge + " " + (s.direction == events::Direction::Activation ? "act" : "grad");
    o.event();
    o << "{\"ph\":\"s\",\"cat\":\"p2p\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(s.rank)) << ",\"tid\":";
    o.num(s.rank) << ",\"ts\":";
    o.us(ss + (se - ss) / 2) << "}";
    o.event();
    o << "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"p2p\",\"name\":";
    o.str(name) << ",\"id\":";
    o.num(static_cast<int64_t>(i) + 1) << ",\"pid\":";
    o.num(pidOf(v.rank)) << ",\"tid\":";
    o.num(v.rank) << ",\"ts\":";
    o.us(vs + (ve - vs) / 2) << "}";
    ++st.flows;
  }

  // Diagnoses as global instants.
  for (const auto& d : run.diagnoses) {
    o.event();
    o << "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"diagnosis\",\"name\":";
    o.str(d.kind + (d.rank >= 0 ? " rank " + std::to_string(d.rank) : "")) << ",\"pid\":";
    o.num(d.rank >= 0 ? pidOf(d.rank) : 0) << ",\"tid\":";
    o.num(std::max(d.rank, 0)) << ",\"ts\":";
    o.us(d.timeNs ? d.timeNs - offsetOf(d.rank) - t0 : 0) << ",\"args\":{\"message\":";
    o.str(d.message) << ",\"waits_on_rank\":";
    o.num(d.waitsOnRank) << ",\"iteration\":";
    o.num(d.iteration) << ",\"action_seq\":";
    o.num(d.actionSeq) << "}}";
  }
  o << "\n]}\n";
  o.close();
  return st;
}

}  // namespace stagescope::report
