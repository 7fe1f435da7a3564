#include "ui/FindFilter.h"

#include <utility>

#include "core/analysis/NonFinite.h"
#include "ui/RunProblems.h"

namespace stagescope::ui {

namespace {

// The module of an action: its own; a rank-wide action (module "") belongs to every module its
// rank holds (a colocated rank holds several).
bool actionOfModule(const model::RunModel& model, const events::ActionRecord& a,
                    const std::string& module) {
  if (!a.module.empty()) return a.module == module;
  return model.rankInfo(a.rank, module) != nullptr;
}

bool matchesTransfer(const model::RunModel& model, const FindQuery& q, size_t i,
                     const std::vector<char>& mismatched) {
  const auto& t = model.transfers[i];
  if (q.rank >= 0 && t.srcRank != q.rank && t.dstRank != q.rank) return false;
  if (!q.module.empty()) {
    const auto [src, dst] = model::edgeModules(t);
    if (src != q.module && dst != q.module) return false;
  }
  if (q.iteration >= 0 && t.iteration != q.iteration) return false;
  if (q.microbatch >= 0 && t.microbatch != q.microbatch) return false;
  if (q.kind >= 0 && static_cast<int>(t.direction) != q.kind) return false;
  if (q.nanInf && !analysis::isNonFinite(t)) return false;
  if (q.mismatch && !mismatched[i]) return false;
  return true;
}

bool matchesGradient(const model::RunModel& model, const FindQuery& q, size_t i) {
  const auto& g = model.gradients[i];
  if (q.mismatch) return false;
  if (q.rank >= 0 && g.rank != q.rank) return false;
  if (!q.module.empty() && g.module != q.module) return false;
  if (q.iteration >= 0 && g.iteration != q.iteration) return false;
  if (q.microbatch >= 0 && g.microbatch != q.microbatch) return false;
  if (q.kind >= 0 && static_cast<int>(g.phase) != q.kind) return false;
  if (q.nanInf && !analysis::isNonFinite(g)) return false;
  return true;
}

bool matchesAction(const model::RunModel& model, const FindQuery& q,
                   const events::ActionRecord& a) {
  if (!q.module.empty() && !actionOfModule(model, a, q.module)) return false;
  if (q.iteration >= 0 && a.iteration != q.iteration) return false;
  if (q.microbatch >= 0 && a.microbatch != q.microbatch) return false;
  if (q.kind >= 0 && static_cast<int>(a.kind) != q.kind) return false;
  return true;
}

// The hits collected so far: the first `limit` kept, all counted.
struct Hits {
  FindWhat what;
  size_t limit;
  std::vector<FindHit> out;
  size_t count = 0;
  void add(int32_t rank, int64_t index) {
    ++count;
    if (out.size() < limit) out.push_back({what, rank, index});
  }
};

// [transfer]: 1 when its pair's sides disagree.
std::vector<char> mismatchedTransfers(const model::RunModel& model) {
  std::vector<char> mismatched(model.transfers.size(), 0);
  for (const auto& p : model.pairs) {
    if (p.sidesAgree()) continue;
    if (p.send >= 0) mismatched[p.send] = 1;
    if (p.recv >= 0) mismatched[p.recv] = 1;
  }
  return mismatched;
}

// Non-finite records in causal order: the first hit is where the NaN/Inf appeared.
void findNonFiniteInCausalOrder(const model::RunModel& model, const FindQuery& q,
                                const ReplayOrder& causal, const std::vector<char>& mismatched,
                                Hits& hits) {
  for (const NonFinite& n : nonFiniteInCausalOrder(model, causal)) {
    const size_t i = static_cast<size_t>(n.index);
    if (q.what == FindWhat::Transfers && n.kind == NonFinite::Kind::Transfer &&
        matchesTransfer(model, q, i, mismatched))
      hits.add(model.transfers[i].rank, n.index);
    if (q.what == FindWhat::Gradients && n.kind == NonFinite::Kind::Gradient &&
        matchesGradient(model, q, i))
      hits.add(model.gradients[i].rank, n.index);
  }
}

void findActions(const model::RunModel& model, const FindQuery& q, Hits& hits) {
  if (q.nanInf || q.mismatch) return;  // actions have neither
  for (size_t r = 0; r < model.actions.size(); ++r) {
    if (q.rank >= 0 && q.rank != static_cast<int>(r)) continue;
    const auto& acts = model.actions[r];
    for (size_t i = 0; i < acts.size(); ++i)
      if (matchesAction(model, q, acts[i]))
        hits.add(static_cast<int32_t>(r), static_cast<int64_t>(i));
  }
}

// All matches in model order.
void findInModelOrder(const model::RunModel& model, const FindQuery& q,
                      const std::vector<char>& mismatched, Hits& hits) {
  switch (q.what) {
    case FindWhat::Actions:
      findActions(model, q, hits);
      break;
    case FindWhat::Transfers:
      for (size_t i = 0; i < model.transfers.size(); ++i)
        if (matchesTransfer(model, q, i, mismatched))
          hits.add(model.transfers[i].rank, static_cast<int64_t>(i));
      break;
    case FindWhat::Gradients:
      for (size_t i = 0; i < model.gradients.size(); ++i)
        if (matchesGradient(model, q, i))
          hits.add(model.gradients[i].rank, static_cast<int64_t>(i));
      break;
  }
}

}  // namespace

std::vector<FindHit> findItems(const model::RunModel& model, const FindQuery& q, size_t limit,
                               size_t* total, const ReplayOrder* causal) {
  Hits hits{q.what, limit, {}, 0};
  std::vector<char> mismatched;
  if (q.what == FindWhat::Transfers && q.mismatch) mismatched = mismatchedTransfers(model);
  if (q.nanInf && causal && q.what != FindWhat::Actions)
    findNonFiniteInCausalOrder(model, q, *causal, mismatched, hits);
  else
    findInModelOrder(model, q, mismatched, hits);
  if (total) *total = hits.count;
  return std::move(hits.out);
}

}  // namespace stagescope::ui
