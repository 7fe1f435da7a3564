// events::Bytes (a record's payload): a value type like the std::vector<uint8_t> it replaces,
// 8 bytes when empty, so a GradientRecord at level stats carries no 24-byte empty vector.
#include "core/events/Bytes.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/events/Events.h"

namespace stagescope::events {
namespace {

TEST(Bytes, EmptyIsOnePointerAndNoBlock) {
  Bytes none;
  EXPECT_EQ(sizeof(Bytes), sizeof(void*));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.begin(), none.end());
  EXPECT_TRUE(none.vec().empty());
  Bytes fromEmpty(std::vector<uint8_t>{});
  EXPECT_TRUE(fromEmpty.empty());
  EXPECT_EQ(fromEmpty.data(), nullptr);  // an empty vector frees the block
  EXPECT_EQ(none, fromEmpty);
}

TEST(Bytes, CopiesTheBytesAndMovesThePointer) {
  Bytes a(std::vector<uint8_t>{1, 2, 3});
  Bytes b = a;
  EXPECT_EQ(b, a);
  EXPECT_NE(b.data(), a.data());  // a deep copy
  b[0] = 9;
  EXPECT_EQ(a[0], 1);
  const uint8_t* bytes = a.data();
  Bytes c = std::move(a);
  EXPECT_EQ(c.data(), bytes);  // moved, not copied
  EXPECT_EQ(c, (std::vector<uint8_t>{1, 2, 3}));
  const std::vector<uint8_t>& v = c;
  EXPECT_EQ(v.size(), 3u);
  c.assign(v.begin() + 1, v.end());
  EXPECT_EQ(c, (std::vector<uint8_t>{2, 3}));
  c = std::vector<uint8_t>{};
  EXPECT_TRUE(c.empty());
}

// The point of Bytes: a gradient record (8.4 M of them in a 10^7-event run) is 160 bytes, not
// the 176 it was with a std::vector payload.
TEST(Bytes, GradientRecordIs160Bytes) {
  EXPECT_EQ(sizeof(GradientRecord), 160u);
}

}  // namespace
}  // namespace stagescope::events
