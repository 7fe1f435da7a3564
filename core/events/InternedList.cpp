#include "core/events/InternedList.h"

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace stagescope::events {
namespace {

// Hash and equality of a list by content, through a pointer (the pool's index keys point into
// its own storage, so a lookup by a caller's vector uses the same functors on its address).
template <typename T>
struct ContentHash {
  size_t operator()(const std::vector<T>* v) const noexcept {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the elements
    for (T x : *v) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h ^ v->size());
  }
};
template <typename T>
struct ContentEqual {
  bool operator()(const std::vector<T>* a, const std::vector<T>* b) const { return *a == *b; }
};

// One pool per element type: every distinct non-empty list once, at a stable address (a deque
// never moves its elements).  Allocated once and never destroyed.
template <typename T>
struct ListPool {
  std::shared_mutex mutex;
  std::deque<std::vector<T>> lists;
  std::unordered_set<const std::vector<T>*, ContentHash<T>, ContentEqual<T>> index;
};

template <typename T>
ListPool<T>& pool() {
  static ListPool<T>* p = new ListPool<T>;
  return *p;
}

}  // namespace

template <typename T>
InternedList<T>::InternedList(const std::vector<T>& values) {
  if (values.empty()) return;
  ListPool<T>& p = pool<T>();
  {
    std::shared_lock lock(p.mutex);
    if (auto it = p.index.find(&values); it != p.index.end()) {
      list_ = *it;
      return;
    }
  }
  std::unique_lock lock(p.mutex);
  if (auto it = p.index.find(&values); it != p.index.end()) {  // another thread was first
    list_ = *it;
    return;
  }
  const std::vector<T>& stored = p.lists.emplace_back(values);
  p.index.insert(&stored);
  list_ = &stored;
}

template <typename T>
const std::vector<T>& InternedList<T>::empty_() {
  static const std::vector<T>* e = new std::vector<T>;
  return *e;
}

template <typename T>
size_t InternedList<T>::poolSize() {
  ListPool<T>& p = pool<T>();
  std::shared_lock lock(p.mutex);
  return p.lists.size();
}

template class InternedList<int64_t>;
template class InternedList<int32_t>;

}  // namespace stagescope::events
