#include "core/model/Pairing.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace stagescope::model {

using events::TransferRecord;

namespace {

// A record's message key, in the reader's transfer order without the side (storage/RunReader
// sorts by it, then side, then file order), so that a run as the reader leaves it is already
// in order.  An edge orders by its text (a Name compares its pointer first).
auto keyOf(const TransferRecord& r) {
  return std::tie(r.iteration, r.microbatch, r.edge, r.direction, r.srcRank, r.dstRank);
}
bool keyBefore(const TransferRecord& a, const TransferRecord& b) {
  return keyOf(a) < keyOf(b);
}

// Where the pair stands among the pairs: its send, else its receive.
int64_t position(const TransferPair& p) {
  return p.send >= 0 ? p.send : p.recv;
}

}  // namespace

TransferPair makePair(const std::vector<TransferRecord>& t, int64_t send, int64_t recv) {
  TransferPair p;
  p.send = send;
  p.recv = recv;
  if (p.complete()) {
    const auto& s = t[static_cast<size_t>(send)];
    const auto& r = t[static_cast<size_t>(recv)];
    p.shapeMatches = s.shape == r.shape;
    p.dtypeMatches = s.dtype == r.dtype;
    p.checksumMatches = s.checksum == 0 || r.checksum == 0 || s.checksum == r.checksum;
  }
  return p;
}

namespace {

// Appends the pairs of the records `at(0..n)` (each key's records next to each other) to
// `pairs`: per key, the k-th send with the k-th receive.  With `inOrder`, false at the first
// key out of order (its records might not be next to each other), pairs half made.
template <typename At>
bool pairKeys(const std::vector<TransferRecord>& t, size_t n, At at, bool inOrder,
              std::vector<TransferPair>& pairs) {
  std::vector<int64_t> sends, recvs;
  for (size_t g = 0; g < n;) {
    const auto key = keyOf(t[at(g)]);
    size_t end = g + 1;
    while (end < n && keyOf(t[at(end)]) == key) ++end;
    if (inOrder && end < n && !keyBefore(t[at(g)], t[at(end)])) return false;
    sends.clear();
    recvs.clear();
    for (size_t i = g; i < end; ++i)
      (t[at(i)].side == events::Side::Send ? sends : recvs).push_back(static_cast<int64_t>(at(i)));
    for (size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k)
      pairs.push_back(
          makePair(t, k < sends.size() ? sends[k] : -1, k < recvs.size() ? recvs[k] : -1));
    g = end;
  }
  return true;
}

}  // namespace

std::vector<TransferPair> pairTransfers(const std::vector<TransferRecord>& t) {
  std::vector<TransferPair> pairs;
  pairs.reserve(t.size() / 2 + 1);
  // In one pass when the input is in key order (a reader's run); else over its positions
  // sorted by key, each key's in input order.
  const auto inputOrder = [](size_t i) { return i; };
  if (!pairKeys(t, t.size(), inputOrder, true, pairs)) {
    pairs.clear();
    std::vector<size_t> order(t.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return keyBefore(t[a], t[b]); });
    const auto keyOrder = [&](size_t i) { return order[i]; };
    pairKeys(t, t.size(), keyOrder, false, pairs);
  }
  auto before = [](const TransferPair& a, const TransferPair& b) {
    return position(a) < position(b);
  };
  if (!std::is_sorted(pairs.begin(), pairs.end(), before))
    std::sort(pairs.begin(), pairs.end(), before);
  return pairs;
}

}  // namespace stagescope::model
