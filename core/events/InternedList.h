// An interned, immutable list of integers: a tensor shape or a list of peer ranks, which a run
// repeats on millions of records from a handful of distinct values.  8 bytes (a pointer into a
// process-wide pool per element type) instead of a 24-byte std::vector with its own heap block.
//
// Contract (as events::Name, core/events/Name.h):
// - Equal lists always have equal handles, so == is one pointer comparison; the empty list is
//   the null handle (a default-constructed list is empty).
// - <, <=> compare element by element, exactly as std::vector does.
// - Lifetime: the pool never frees; a list and every reference or iterator its read API hands
//   out stay valid until the process exits.
// - Thread safety: lists may be created, copied and read from any thread concurrently
//   (creating one from values takes a lock; copying, == and reading never lock).
// - Immutable: assigning points the handle at another interned list; to change a list, build a
//   std::vector and assign it.
// Read API: what code did with the std::vector this replaces (size, [], iteration, ==, <,
// conversion to const std::vector<T>&).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

namespace stagescope::events {

template <typename T>
class InternedList {
 public:
  using value_type = T;
  using const_iterator = typename std::vector<T>::const_iterator;

  constexpr InternedList() = default;
  InternedList(const std::vector<T>& values);  // interns (a lookup; an insert the first time)
  InternedList(std::initializer_list<T> values) : InternedList(std::vector<T>(values)) {}

  const std::vector<T>& vec() const { return list_ ? *list_ : empty_(); }
  operator const std::vector<T>&() const { return vec(); }

  bool empty() const { return list_ == nullptr; }
  size_t size() const { return vec().size(); }
  const T& operator[](size_t i) const { return vec()[i]; }
  const T& at(size_t i) const { return vec().at(i); }
  const T& front() const { return vec().front(); }
  const T& back() const { return vec().back(); }
  const T* data() const { return vec().data(); }
  const_iterator begin() const { return vec().begin(); }
  const_iterator end() const { return vec().end(); }

  // The pool's identity of this list (null when empty): for hashing, never for ordering.
  const void* id() const { return list_; }

  friend bool operator==(const InternedList& a, const InternedList& b) {
    return a.list_ == b.list_;
  }
  friend bool operator==(const InternedList& a, const std::vector<T>& b) { return a.vec() == b; }
  friend auto operator<=>(const InternedList& a, const InternedList& b) {
    return a.vec() <=> b.vec();
  }
  friend auto operator<=>(const InternedList& a, const std::vector<T>& b) { return a.vec() <=> b; }

  // Distinct lists interned so far in this process (tests, diagnostics).
  static size_t poolSize();

 private:
  static const std::vector<T>& empty_();
  const std::vector<T>* list_ = nullptr;  // into the pool; null = empty
};

// Instantiated in InternedList.cpp for these element types only.
extern template class InternedList<int64_t>;
extern template class InternedList<int32_t>;

using Shape = InternedList<int64_t>;     // a tensor's extents, outermost first
using RankList = InternedList<int32_t>;  // global ranks

}  // namespace stagescope::events

template <typename T>
struct std::hash<stagescope::events::InternedList<T>> {
  size_t operator()(const stagescope::events::InternedList<T>& l) const noexcept {
    return std::hash<const void*>()(l.id());
  }
};
