// The one pairing rule (core/model/Pairing.h): which send and which receive are one message,
// on hand-built records: unsorted input, a missing receive, a missing send, a duplicate send.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "core/model/Pairing.h"

namespace stagescope::model {
namespace {

using events::Direction;
using events::Side;
using events::TransferRecord;

TransferRecord side(Side s, int iteration, int microbatch, const char* edge = "llm:pp0->pp1",
                    Direction d = Direction::Activation, int src = 0, int dst = 1) {
  TransferRecord t;
  t.side = s;
  t.rank = s == Side::Send ? src : dst;
  t.srcRank = src;
  t.dstRank = dst;
  t.edge = edge;
  t.direction = d;
  t.iteration = iteration;
  t.microbatch = microbatch;
  t.shape = {2, 3};
  t.dtype = "float32";
  t.checksum = 0x1234;
  return t;
}
TransferRecord send(int iteration, int microbatch) {
  return side(Side::Send, iteration, microbatch);
}
TransferRecord recv(int iteration, int microbatch) {
  return side(Side::Recv, iteration, microbatch);
}

using Sides = std::vector<std::pair<int64_t, int64_t>>;
Sides sidesOf(const std::vector<TransferPair>& pairs) {
  Sides out;
  for (const auto& p : pairs) out.emplace_back(p.send, p.recv);
  return out;
}

TEST(Pairing, SortedInputPairsInInputOrder) {
  // As the reader leaves a run: by message, sends before receives.
  const std::vector<TransferRecord> t = {send(0, 0), recv(0, 0), send(0, 1),
                                         recv(0, 1), send(1, 0), recv(1, 0)};
  const auto pairs = pairTransfers(t);
  EXPECT_EQ(sidesOf(pairs), (Sides{{0, 1}, {2, 3}, {4, 5}}));
  for (const auto& p : pairs) EXPECT_TRUE(p.ok());
  EXPECT_TRUE(pairTransfers({}).empty());
}

TEST(Pairing, UnsortedInputPairsAsSorted) {
  // Receives before their sends, messages interleaved: the same messages pair, ordered by the
  // position of their send.
  const std::vector<TransferRecord> t = {recv(1, 0), recv(0, 1), send(0, 0),
                                         send(1, 0), recv(0, 0), send(0, 1)};
  const auto pairs = pairTransfers(t);
  EXPECT_EQ(sidesOf(pairs), (Sides{{2, 4}, {3, 0}, {5, 1}}));
  for (const auto& p : pairs) EXPECT_TRUE(p.ok());
  // Every permutation gives the same messages.
  std::vector<size_t> perm = {0, 1, 2, 3, 4, 5};
  do {
    std::vector<TransferRecord> shuffled;
    for (size_t i : perm) shuffled.push_back(t[i]);
    const auto got = pairTransfers(shuffled);
    ASSERT_EQ(got.size(), 3u);
    for (const auto& p : got) {
      ASSERT_TRUE(p.complete());
      const auto& s = shuffled[static_cast<size_t>(p.send)];
      const auto& r = shuffled[static_cast<size_t>(p.recv)];
      EXPECT_EQ(s.side, Side::Send);
      EXPECT_EQ(r.side, Side::Recv);
      EXPECT_EQ(std::make_pair(s.iteration, s.microbatch),
                std::make_pair(r.iteration, r.microbatch));
    }
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end(),
                               [](const auto& a, const auto& b) { return a.send < b.send; }));
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Pairing, AMissingReceiveIsASendAlone) {
  const std::vector<TransferRecord> t = {send(0, 0), recv(0, 0), send(0, 1)};
  const auto pairs = pairTransfers(t);
  EXPECT_EQ(sidesOf(pairs), (Sides{{0, 1}, {2, -1}}));
  EXPECT_FALSE(pairs[1].complete());
  EXPECT_TRUE(pairs[1].sidesAgree());  // a missing side is not disagreement
}

TEST(Pairing, AMissingSendIsAReceiveAlone) {
  const std::vector<TransferRecord> t = {recv(0, 1), send(0, 0), recv(0, 0)};
  const auto pairs = pairTransfers(t);
  // Ordered by the send, or the receive when there is none.
  EXPECT_EQ(sidesOf(pairs), (Sides{{-1, 0}, {1, 2}}));
  EXPECT_FALSE(pairs[0].complete());
  EXPECT_TRUE(pairs[0].sidesAgree());
}

TEST(Pairing, ADuplicateSendIsShownAsASendWithoutReceive) {
  // A retried send of one message received once: the first send (input order) is the message,
  // the second a send alone; no record is dropped.
  const std::vector<TransferRecord> t = {send(0, 0), send(0, 0), recv(0, 0)};
  const auto pairs = pairTransfers(t);
  EXPECT_EQ(sidesOf(pairs), (Sides{{0, 2}, {1, -1}}));
  // Unsorted: the same.
  const std::vector<TransferRecord> u = {recv(0, 0), send(0, 0), send(0, 0)};
  EXPECT_EQ(sidesOf(pairTransfers(u)), (Sides{{1, 0}, {2, -1}}));
}

TEST(Pairing, RepeatedMessagesOfOneKeyPairKthWithKth) {
  const std::vector<TransferRecord> t = {recv(0, 0), send(0, 0), send(0, 0), recv(0, 0)};
  EXPECT_EQ(sidesOf(pairTransfers(t)), (Sides{{1, 0}, {2, 3}}));
}

TEST(Pairing, EveryKeyFieldSeparatesMessages) {
  std::vector<TransferRecord> t = {side(Side::Send, 0, 0)};
  t.push_back(side(Side::Recv, 0, 0, "vision->llm"));
  t.push_back(side(Side::Recv, 0, 0, "llm:pp0->pp1", Direction::Gradient));
  t.push_back(side(Side::Recv, 1, 0));
  t.push_back(side(Side::Recv, 0, 1));
  t.push_back(side(Side::Recv, 0, 0, "llm:pp0->pp1", Direction::Activation, 2, 1));
  t.push_back(side(Side::Recv, 0, 0, "llm:pp0->pp1", Direction::Activation, 0, 2));
  const auto pairs = pairTransfers(t);
  ASSERT_EQ(pairs.size(), t.size());
  for (const auto& p : pairs) EXPECT_FALSE(p.complete());
}

TEST(Pairing, ACompletePairComparesItsSides) {
  auto pairOf = [](TransferRecord s, TransferRecord r) {
    const auto pairs = pairTransfers({s, r});
    EXPECT_EQ(pairs.size(), 1u);
    return pairs.front();
  };
  TransferRecord s = send(0, 0), r = recv(0, 0);
  r.shape = {3, 2};
  TransferPair p = pairOf(s, r);
  EXPECT_FALSE(p.shapeMatches);
  EXPECT_TRUE(p.dtypeMatches);  // shape alone
  r = recv(0, 0);
  r.dtype = "bfloat16";
  p = pairOf(s, r);
  EXPECT_TRUE(p.shapeMatches);
  EXPECT_FALSE(p.dtypeMatches);
  EXPECT_FALSE(p.ok());
  r = recv(0, 0);
  r.checksum = 0x99;
  EXPECT_FALSE(pairOf(s, r).checksumMatches);
  r.checksum = 0;  // no checksum on one side: nothing to compare
  EXPECT_TRUE(pairOf(s, r).checksumMatches);
}

TEST(Pairing, RandomRunsPairAsTheDefinitionSays) {
  // The rule written out plainly (a map per key, then ordered by position) against the rule,
  // on random records: few keys, so that keys repeat, sides go missing and sends repeat.
  std::mt19937 rng(7);
  const char* edges[] = {"llm:pp0->pp1", "vision->llm"};
  for (int run = 0; run < 200; ++run) {
    std::vector<TransferRecord> t;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i)
      t.push_back(side(rng() % 2 ? Side::Send : Side::Recv, static_cast<int>(rng() % 2),
                       static_cast<int>(rng() % 3), edges[rng() % 2],
                       rng() % 2 ? Direction::Gradient : Direction::Activation));
    if (run % 2)
      std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) {
        return std::tie(a.iteration, a.microbatch, a.edge, a.direction, a.srcRank, a.dstRank,
                        a.side) < std::tie(b.iteration, b.microbatch, b.edge, b.direction,
                                           b.srcRank, b.dstRank, b.side);
      });  // as the reader leaves a run
    std::map<std::tuple<int, int, std::string, int>,
             std::pair<std::vector<int64_t>, std::vector<int64_t>>>
        byKey;
    for (size_t i = 0; i < t.size(); ++i) {
      auto& [sends, recvs] = byKey[{t[i].iteration, t[i].microbatch, t[i].edge.str(),
                                    static_cast<int>(t[i].direction)}];
      (t[i].side == Side::Send ? sends : recvs).push_back(static_cast<int64_t>(i));
    }
    Sides want;
    for (const auto& [key, sides] : byKey)
      for (size_t k = 0; k < std::max(sides.first.size(), sides.second.size()); ++k)
        want.emplace_back(k < sides.first.size() ? sides.first[k] : -1,
                          k < sides.second.size() ? sides.second[k] : -1);
    std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
      return (a.first >= 0 ? a.first : a.second) < (b.first >= 0 ? b.first : b.second);
    });
    EXPECT_EQ(sidesOf(pairTransfers(t)), want) << "run " << run;
  }
}

}  // namespace
}  // namespace stagescope::model
