// RecordList: records come back in arrival order, in chunks of kChunk (all but the last full),
// across clear() and reuse of the kept chunks.
#include <gtest/gtest.h>

#include <string>

#include "storage/RecordList.h"

namespace stagescope::storage::test {
namespace {

using List = RecordList<std::string>;

// Every record of `list`, in order, with the chunk sizes checked on the way.
std::vector<std::string> contents(const List& list) {
  std::vector<std::string> out;
  size_t chunks = 0, lastSize = 0;
  list.forEachChunk([&](std::span<const std::string> chunk) {
    if (chunks > 0) {
      EXPECT_EQ(lastSize, List::kChunk) << "chunk " << chunks - 1 << " not full";
    }
    EXPECT_GT(chunk.size(), 0u);
    ++chunks;
    lastSize = chunk.size();
    out.insert(out.end(), chunk.begin(), chunk.end());
  });
  return out;
}

void fill(List& list, int n, const std::string& tag) {
  for (int i = 0; i < n; ++i) list.push_back(tag + std::to_string(i));
}

void expectInOrder(const List& list, int n, const std::string& tag) {
  ASSERT_EQ(list.size(), static_cast<size_t>(n));
  const auto got = contents(list);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], tag + std::to_string(i)) << "record " << i;
}

TEST(RecordList, KeepsArrivalOrderAcrossChunksAndClears) {
  List list;
  EXPECT_TRUE(list.empty());
  const int many = static_cast<int>(List::kChunk * (List::kKeptChunks + 3) + 7);
  fill(list, many, "a");  // more chunks than clear() keeps
  expectInOrder(list, many, "a");
  list.clear();
  EXPECT_TRUE(list.empty());
  expectInOrder(list, 0, "");
  fill(list, 2 * static_cast<int>(List::kChunk) + 1, "b");  // reuses kept chunks
  expectInOrder(list, 2 * static_cast<int>(List::kChunk) + 1, "b");
  list.clear();
  fill(list, 5, "c");
  expectInOrder(list, 5, "c");
}

}  // namespace
}  // namespace stagescope::storage::test
