// events::Name: interning (one handle per text), the std::string-like read API, ordering
// identical to std::string's, and concurrent interning from many threads.
#include "core/events/Name.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::events {
namespace {

TEST(Name, EqualTextsShareOneHandle) {
  const std::string text = "llm.layers.3.attn.q.weight";  // longer than std::string's SSO
  Name a(text);
  Name b(std::string_view("llm.layers.3.attn.q.weight"));
  Name c("llm.layers.3.attn.q.weight");
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.id(), c.id());
  EXPECT_EQ(a.c_str(), c.c_str());  // the same stored text, not a copy
  EXPECT_TRUE(a == b);
  Name d("llm.layers.3.attn.k.weight");
  EXPECT_NE(a.id(), d.id());
  EXPECT_FALSE(a == d);
  EXPECT_EQ(a.str(), text);
  EXPECT_EQ(sizeof(Name), sizeof(void*));
}

TEST(Name, EmptyTextIsTheDefaultHandle) {
  Name none;
  Name fromEmpty("");
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(fromEmpty.empty());
  EXPECT_EQ(none, fromEmpty);
  EXPECT_EQ(none.id(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_STREQ(none.c_str(), "");
  EXPECT_EQ(none, "");
  EXPECT_FALSE(Name("x").empty());
}

TEST(Name, OrdersExactlyAsStdString) {
  // Prefixes, bytes above 127 (std::string compares them as unsigned), equal texts.
  std::vector<std::string> texts = {"b", "a",      "ab",    "abc", "",      "\xff", "\x7f",
                                    "A", "llm.10", "llm.9", "llm", "a\xe9", "ab",   "zz"};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int n = static_cast<int>(rng() % 6); n > 0; --n) s += static_cast<char>(rng() % 256);
    texts.push_back(s);
  }
  std::vector<Name> names(texts.begin(), texts.end());
  for (size_t i = 0; i < texts.size(); ++i) {
    for (size_t j = 0; j < texts.size(); ++j) {
      ASSERT_EQ(names[i] < names[j], texts[i] < texts[j]) << i << " " << j;
      ASSERT_EQ(names[i] == names[j], texts[i] == texts[j]) << i << " " << j;
      ASSERT_EQ(names[i] < texts[j], texts[i] < texts[j]) << i << " " << j;
    }
  }
  std::sort(texts.begin(), texts.end());
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(names[i].str(), texts[i]);
}

TEST(Name, ReadsLikeAString) {
  Name n("vision->llm");
  EXPECT_EQ(n, "vision->llm");
  EXPECT_EQ("vision->llm", n);
  EXPECT_EQ(n, std::string("vision->llm"));
  EXPECT_NE(n, "vision");
  EXPECT_TRUE(n < std::string("z"));
  EXPECT_EQ(n.size(), 11u);
  EXPECT_EQ(n.find("->"), 6u);
  EXPECT_EQ(n.substr(0, 6), "vision");
  EXPECT_TRUE(n.starts_with("vision"));
  EXPECT_EQ(n + "!", "vision->llm!");
  EXPECT_EQ("edge " + n, "edge vision->llm");
  EXPECT_EQ(std::string("[") + n + ']', "[vision->llm]");
  const std::string& s = n;
  EXPECT_EQ(s, "vision->llm");
  std::string_view v = n;
  EXPECT_EQ(v, "vision->llm");
  std::ostringstream os;
  os << n;
  EXPECT_EQ(os.str(), "vision->llm");
  std::map<std::string, int> byText;
  byText[n] = 1;
  EXPECT_EQ(byText.count("vision->llm"), 1u);
  n = "llm:pp0->pp1";  // assignment re-points the handle
  EXPECT_EQ(n, "llm:pp0->pp1");
}

// Threads intern the same texts in different orders at once: every thread must get the one
// handle of each text, and the pool must store each text once.
TEST(Name, ConcurrentInterningGivesOneHandlePerText) {
  constexpr int kTexts = 2000, kThreads = 8;
  std::vector<std::string> texts;
  for (int i = 0; i < kTexts; ++i)
    texts.push_back("NameTest.concurrent.param." + std::to_string(i) + ".weight");
  const size_t before = Name::poolSize();
  std::vector<std::vector<const void*>> ids(kThreads, std::vector<const void*>(kTexts));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order(kTexts);
      for (int i = 0; i < kTexts; ++i) order[static_cast<size_t>(i)] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(t)));
      for (int i : order)
        ids[static_cast<size_t>(t)][static_cast<size_t>(i)] =
            Name(texts[static_cast<size_t>(i)]).id();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[static_cast<size_t>(t)], ids[0]);
  for (int i = 0; i < kTexts; ++i)
    EXPECT_EQ(Name(texts[static_cast<size_t>(i)]).str(), texts[static_cast<size_t>(i)]);
  EXPECT_EQ(Name::poolSize() - before, static_cast<size_t>(kTexts));
}

// The read model holds ~10^7 of these: their texts and lists are handles, not owned strings
// and vectors (a GradientRecord was 288 bytes with five heap blocks).
TEST(Name, RecordsHoldHandlesNotStrings) {
  EXPECT_LE(sizeof(GradientRecord), 176u);
  EXPECT_LE(sizeof(ActionRecord), 56u);
  EXPECT_LE(sizeof(TransferRecord), 176u);
}

}  // namespace
}  // namespace stagescope::events
