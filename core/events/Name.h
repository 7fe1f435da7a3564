// An interned, immutable text: the name of a parameter, module, dtype, edge, ... that a run
// repeats on millions of records.  A Name is 8 bytes (a pointer into a process-wide pool)
// instead of a 32-byte std::string with its own heap block for texts past 15 characters.
//
// Contract:
// - Equal texts always have equal handles, so == and != are one pointer comparison; the empty
//   text is the null handle (a default-constructed Name is "").
// - <, <=> order by the text's bytes, exactly as std::string does (sorts are unchanged).
// - Lifetime: the pool never frees.  A Name, and every pointer or reference its read API
//   hands out (str(), c_str(), string_view), stays valid until the process exits, including
//   during static destruction.
// - Thread safety: Names may be created, copied and read from any thread concurrently.
//   Creating one from a text takes a lock (shared when the text is already interned);
//   copying, comparing with == and reading never lock.
// - Immutable: assigning to a Name points it at another interned text; no text ever changes.
// - Memory: each distinct text is stored once for the life of the process, so interning is for
//   texts drawn from a small vocabulary (names, dtypes, edges), never for free-form messages.
//
// Read API: what code did with the std::string this replaces (==, <, empty(), size(),
// c_str(), find, substr, +, <<, conversion to const std::string& and std::string_view), so a
// consumer compiles unchanged.
#pragma once

#include <compare>
#include <concepts>
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace stagescope::events {

class Name;

// Types a Name compares and concatenates with: every string-like type other than Name.
template <typename S>
concept NameComparable =
    std::convertible_to<const S&, std::string_view> && !std::same_as<std::remove_cvref_t<S>, Name>;

class Name {
 public:
  constexpr Name() = default;
  Name(std::string_view text);  // interns `text` (a lookup; an insert the first time)
  Name(const std::string& text) : Name(std::string_view(text)) {}
  Name(const char* text) : Name(std::string_view(text)) {}

  const std::string& str() const { return text_ ? *text_ : empty_(); }
  operator const std::string&() const { return str(); }
  operator std::string_view() const { return str(); }

  bool empty() const { return text_ == nullptr; }
  size_t size() const { return str().size(); }
  size_t length() const { return str().size(); }
  const char* c_str() const { return str().c_str(); }
  const char* data() const { return str().data(); }
  std::string::const_iterator begin() const { return str().begin(); }
  std::string::const_iterator end() const { return str().end(); }
  char operator[](size_t i) const { return str()[i]; }
  char front() const { return str().front(); }
  char back() const { return str().back(); }
  size_t find(std::string_view s, size_t pos = 0) const { return str().find(s, pos); }
  size_t find(char c, size_t pos = 0) const { return str().find(c, pos); }
  size_t rfind(std::string_view s, size_t pos = std::string::npos) const {
    return str().rfind(s, pos);
  }
  size_t rfind(char c, size_t pos = std::string::npos) const { return str().rfind(c, pos); }
  std::string substr(size_t pos = 0, size_t n = std::string::npos) const {
    return str().substr(pos, n);
  }
  bool starts_with(std::string_view s) const { return str().starts_with(s); }
  bool ends_with(std::string_view s) const { return str().ends_with(s); }
  int compare(std::string_view s) const { return str().compare(s); }

  // The pool's identity of this text (null for ""): equal for equal texts, stable for the
  // process; for hashing, never for ordering.
  const void* id() const { return text_; }

  friend bool operator==(const Name& a, const Name& b) { return a.text_ == b.text_; }
  friend std::strong_ordering operator<=>(const Name& a, const Name& b) {
    if (a.text_ == b.text_) return std::strong_ordering::equal;
    return a.str() <=> b.str();
  }
  template <NameComparable S>
  friend bool operator==(const Name& a, const S& b) {
    return std::string_view(a.str()) == std::string_view(b);
  }
  template <NameComparable S>
  friend std::strong_ordering operator<=>(const Name& a, const S& b) {
    return std::string_view(a.str()) <=> std::string_view(b);
  }

  // Distinct texts interned so far in this process (tests, diagnostics).
  static size_t poolSize();

 private:
  static const std::string& empty_();
  const std::string* text_ = nullptr;  // into the pool; null = ""
};

inline std::string operator+(const Name& a, const Name& b) {
  return a.str() + b.str();
}
template <NameComparable S>
std::string operator+(const Name& a, const S& b) {
  std::string out = a.str();
  out += std::string_view(b);
  return out;
}
template <NameComparable S>
std::string operator+(const S& a, const Name& b) {
  std::string out(std::string_view{a});
  out += b.str();
  return out;
}
inline std::string operator+(const Name& a, char c) {
  return a.str() + c;
}
inline std::string operator+(char c, const Name& b) {
  return c + b.str();
}
std::ostream& operator<<(std::ostream& os, const Name& n);

}  // namespace stagescope::events

template <>
struct std::hash<stagescope::events::Name> {
  size_t operator()(const stagescope::events::Name& n) const noexcept {
    return std::hash<const void*>()(n.id());
  }
};
