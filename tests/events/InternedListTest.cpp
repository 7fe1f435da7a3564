// events::InternedList (Shape, RankList): one handle per list, vector-like reads, ordering
// identical to std::vector's, concurrent interning.
#include "core/events/InternedList.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

namespace stagescope::events {
namespace {

TEST(InternedList, EqualListsShareOneHandle) {
  Shape a(std::vector<int64_t>{4, 128, 64});
  Shape b{4, 128, 64};
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.data(), b.data());
  EXPECT_TRUE(a == b);
  Shape c{4, 128, 65};
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.id(), c.id());
  // Element types have separate pools: the same values as ranks are another list.
  RankList r{4, 128, 64};
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(sizeof(Shape), sizeof(void*));
}

TEST(InternedList, EmptyListIsTheDefaultHandle) {
  Shape none;
  Shape fromEmpty(std::vector<int64_t>{});
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, fromEmpty);
  EXPECT_EQ(none.id(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.begin(), none.end());
  EXPECT_FALSE(Shape{0}.empty());  // a list holding one 0 is not the empty list
  EXPECT_NE(Shape{0}, none);
}

TEST(InternedList, ReadsLikeAVector) {
  RankList peers{3, 1, 2};
  EXPECT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0], 3);
  EXPECT_EQ(peers.front(), 3);
  EXPECT_EQ(peers.back(), 2);
  int sum = 0;
  for (int p : peers) sum += p;
  EXPECT_EQ(sum, 6);
  EXPECT_NE(std::find(peers.begin(), peers.end(), 1), peers.end());
  const std::vector<int32_t>& v = peers;
  EXPECT_EQ(v, (std::vector<int32_t>{3, 1, 2}));
  EXPECT_TRUE(peers == (std::vector<int32_t>{3, 1, 2}));
  std::vector<int32_t> sorted = peers;  // a mutable copy
  std::sort(sorted.begin(), sorted.end());
  peers = sorted;  // assignment re-points the handle
  EXPECT_EQ(peers, (RankList{1, 2, 3}));
}

TEST(InternedList, OrdersExactlyAsStdVector) {
  std::mt19937 rng(11);
  std::vector<std::vector<int64_t>> lists = {{}, {0}, {0, 0}, {-1}, {1, 2}, {1}, {2}, {1, 2, 3}};
  for (int i = 0; i < 150; ++i) {
    std::vector<int64_t> v(rng() % 4);
    for (auto& x : v) x = static_cast<int64_t>(rng() % 5) - 2;
    lists.push_back(v);
  }
  std::vector<Shape> shapes(lists.begin(), lists.end());
  for (size_t i = 0; i < lists.size(); ++i) {
    for (size_t j = 0; j < lists.size(); ++j) {
      ASSERT_EQ(shapes[i] < shapes[j], lists[i] < lists[j]) << i << " " << j;
      ASSERT_EQ(shapes[i] == shapes[j], lists[i] == lists[j]) << i << " " << j;
    }
  }
}

TEST(InternedList, ConcurrentInterningGivesOneHandlePerList) {
  constexpr int kLists = 1000, kThreads = 8;
  const size_t before = Shape::poolSize();
  std::vector<std::vector<const void*>> ids(kThreads, std::vector<const void*>(kLists));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order(kLists);
      for (int i = 0; i < kLists; ++i) order[static_cast<size_t>(i)] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(t)));
      for (int i : order)
        ids[static_cast<size_t>(t)][static_cast<size_t>(i)] = Shape{777001, i, 3}.id();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[static_cast<size_t>(t)], ids[0]);
  for (int i = 0; i < kLists; ++i)
    EXPECT_EQ((Shape{777001, i, 3}).vec(), (std::vector<int64_t>{777001, i, 3}));
  EXPECT_EQ(Shape::poolSize() - before, static_cast<size_t>(kLists));
}

}  // namespace
}  // namespace stagescope::events
