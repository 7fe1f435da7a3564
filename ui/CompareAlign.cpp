#include "ui/CompareAlign.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

namespace stagescope::ui {

const char* toString(AlignKind k) {
  switch (k) {
    case AlignKind::Transfer:
      return "transfer";
    case AlignKind::Loss:
      return "loss";
    case AlignKind::Gradient:
      return "gradient";
  }
  return "?";
}
const char* toString(AlignState s) {
  switch (s) {
    case AlignState::Same:
      return "same";
    case AlignState::Differ:
      return "differ";
    case AlignState::OnlyA:
      return "only in A";
    case AlignState::OnlyB:
      return "only in B";
  }
  return "?";
}

namespace {

struct Entry {
  AlignKind kind = AlignKind::Transfer;
  int iteration = -1, microbatch = -1, order = 0;
  int64_t rep = -1;
  int repTp = INT_MAX;
  int dp = INT_MAX;
  double value = 0;
  uint64_t checksum = 0;
  std::map<int64_t, uint64_t> shards;  // partition offset -> checksum
  double normSq = 0;
  bool replicated = false;
};

using Table = std::unordered_map<std::string, Entry>;

int dpOf(const storage::RunModel& m, int rank) {
  return rank >= 0 && rank < static_cast<int>(m.ranks.size()) ? m.ranks[rank].dp : 0;
}
int tpOf(const storage::RunModel& m, int rank) {
  return rank >= 0 && rank < static_cast<int>(m.ranks.size()) ? m.ranks[rank].tp : 0;
}

Table tableOf(const storage::RunModel& m) {
  Table t;
  for (const auto& p : m.pairs) {
    int64_t idx = p.send >= 0 ? p.send : p.recv;
    if (idx < 0) continue;
    const auto& tr = m.transfers[idx];
    int dp = dpOf(m, tr.srcRank);
    std::string key = tr.edge + " " + events::toString(tr.direction) + " it" +
                      std::to_string(tr.iteration) + " mb" + std::to_string(tr.microbatch) + " dp" +
                      std::to_string(dp);
    Entry& e = t[key];
    int tp = tpOf(m, tr.srcRank);
    if (tp < e.repTp) {
      e.kind = AlignKind::Transfer;
      e.iteration = tr.iteration;
      e.microbatch = tr.microbatch;
      e.order = tr.direction == events::Direction::Activation ? 0 : 2;
      e.rep = idx;
      e.repTp = tp;
      e.checksum = tr.checksum;
    }
  }
  for (size_t i = 0; i < m.losses.size(); ++i) {
    const auto& l = m.losses[i];
    std::string key = "loss it" + std::to_string(l.iteration) + " mb" +
                      std::to_string(l.microbatch) + " dp" + std::to_string(l.dp);
    Entry& e = t[key];
    if (e.rep >= 0) continue;
    e.kind = AlignKind::Loss;
    e.iteration = l.iteration;
    e.microbatch = l.microbatch;
    e.order = 1;
    e.rep = static_cast<int64_t>(i);
    e.value = l.loss;
  }
  for (size_t i = 0; i < m.gradients.size(); ++i) {
    const auto& g = m.gradients[i];
    const bool perReplica = g.phase == events::GradPhase::Accumulated;
    std::string key = g.param + " " + events::toString(g.phase) + " it" +
                      std::to_string(g.iteration) + " mb" + std::to_string(g.microbatch);
    if (perReplica) key += " dp" + std::to_string(g.dp);
    Entry& e = t[key];
    if (!perReplica && g.dp > e.dp) continue;  // reduced values: one replica speaks for all
    if (!perReplica && g.dp < e.dp) {
      e.shards.clear();
      e.normSq = 0;
    }
    e.kind = AlignKind::Gradient;
    e.iteration = g.iteration;
    e.microbatch = g.microbatch;
    e.order = 3 + std::min(static_cast<int>(g.phase), 2);
    e.dp = g.dp;
    e.replicated = g.partitionDim < 0;
    if (e.rep < 0 || g.tp < e.repTp) {
      e.rep = static_cast<int64_t>(i);
      e.repTp = g.tp;
    }
    int64_t offset = e.replicated ? 0 : g.partitionOffset;
    if (e.shards.emplace(offset, g.checksum).second) e.normSq += g.norm * g.norm;
    e.value = std::sqrt(e.normSq);
  }
  return t;
}

bool close(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= tol * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace

Alignment alignRuns(const storage::RunModel& ma, const storage::RunModel& mb, double tol) {
  Table ta = tableOf(ma), tb = tableOf(mb);
  Alignment out;
  out.items.reserve(ta.size() + tb.size() / 8);
  for (auto& [key, ea] : ta) {
    AlignedItem it;
    it.kind = ea.kind;
    it.key = key;
    it.iteration = ea.iteration;
    it.microbatch = ea.microbatch;
    it.order = ea.order;
    it.a = ea.rep;
    it.valueA = ea.value;
    it.checksumA = ea.checksum;
    auto f = tb.find(key);
    if (f == tb.end()) {
      it.state = AlignState::OnlyA;
    } else {
      const Entry& eb = f->second;
      it.b = eb.rep;
      it.valueB = eb.value;
      it.checksumB = eb.checksum;
      bool same = true;
      switch (ea.kind) {
        case AlignKind::Transfer:
          same = !(ea.checksum && eb.checksum && ea.checksum != eb.checksum);
          break;
        case AlignKind::Loss:
          same = close(ea.value, eb.value, tol);
          break;
        case AlignKind::Gradient: {
          bool sameSharding =
              ea.shards.size() == eb.shards.size() &&
              std::equal(ea.shards.begin(), ea.shards.end(), eb.shards.begin(),
                         [](const auto& x, const auto& y) { return x.first == y.first; });
          if (sameSharding && ea.shards.begin()->second && eb.shards.begin()->second)
            same = ea.shards == eb.shards;
          else
            same = close(ea.value, eb.value, tol);
          it.checksumA = ea.shards.empty() ? 0 : ea.shards.begin()->second;
          it.checksumB = eb.shards.empty() ? 0 : eb.shards.begin()->second;
          break;
        }
      }
      it.state = same ? AlignState::Same : AlignState::Differ;
      tb.erase(f);
    }
    out.items.push_back(std::move(it));
  }
  for (auto& [key, eb] : tb) {
    AlignedItem it;
    it.kind = eb.kind;
    it.key = key;
    it.iteration = eb.iteration;
    it.microbatch = eb.microbatch;
    it.order = eb.order;
    it.b = eb.rep;
    it.valueB = eb.value;
    it.checksumB = eb.checksum;
    it.state = AlignState::OnlyB;
    out.items.push_back(std::move(it));
  }
  auto mbKey = [](int mb) { return mb < 0 ? INT_MAX : mb; };
  std::sort(out.items.begin(), out.items.end(), [&](const AlignedItem& x, const AlignedItem& y) {
    return std::make_tuple(x.iteration, mbKey(x.microbatch), x.order, std::cref(x.key)) <
           std::make_tuple(y.iteration, mbKey(y.microbatch), y.order, std::cref(y.key));
  });
  for (size_t i = 0; i < out.items.size(); ++i) {
    switch (out.items[i].state) {
      case AlignState::Same:
        ++out.same;
        break;
      case AlignState::Differ:
        ++out.differ;
        if (out.firstDivergence < 0) out.firstDivergence = static_cast<int64_t>(i);
        break;
      case AlignState::OnlyA:
        ++out.onlyA;
        break;
      case AlignState::OnlyB:
        ++out.onlyB;
        break;
    }
  }
  return out;
}

}  // namespace stagescope::ui
