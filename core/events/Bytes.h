// A record's raw payload bytes in 8 bytes: a pointer to a std::vector<uint8_t> that exists only
// when there are bytes.  Below level `full` payloads are empty, and a run holds millions of
// gradient records (8.4 M in a 10^7-event run): a 24-byte empty std::vector in each costs
// 200 MB where this costs 67 MB.
//
// Contract: a value type (copying copies the bytes; moving moves the pointer).  Empty and null
// are the same state: assigning an empty vector frees the block.  Read API: what code did with
// the std::vector<uint8_t> this replaces (size, data, [], iteration, ==, conversion to
// const std::vector<uint8_t>&).  Not thread-safe beyond what a std::vector is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace stagescope::events {

class Bytes {
 public:
  using value_type = uint8_t;
  using const_iterator = std::vector<uint8_t>::const_iterator;

  Bytes() = default;
  Bytes(std::vector<uint8_t> bytes) { *this = std::move(bytes); }
  Bytes(const Bytes& o) : p_(o.p_ ? std::make_unique<std::vector<uint8_t>>(*o.p_) : nullptr) {}
  Bytes(Bytes&&) noexcept = default;
  Bytes& operator=(const Bytes& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<std::vector<uint8_t>>(*o.p_) : nullptr;
    return *this;
  }
  Bytes& operator=(Bytes&&) noexcept = default;
  Bytes& operator=(std::vector<uint8_t> bytes) {
    if (bytes.empty())
      p_.reset();
    else
      p_ = std::make_unique<std::vector<uint8_t>>(std::move(bytes));
    return *this;
  }
  template <typename It>
  void assign(It first, It last) {
    *this = std::vector<uint8_t>(first, last);
  }
  void clear() { p_.reset(); }
  void resize(size_t n) {
    if (n == 0) {
      p_.reset();
      return;
    }
    if (!p_) p_ = std::make_unique<std::vector<uint8_t>>();
    p_->resize(n);
  }

  const std::vector<uint8_t>& vec() const { return p_ ? *p_ : empty_(); }
  operator const std::vector<uint8_t>&() const { return vec(); }

  bool empty() const { return !p_; }
  size_t size() const { return p_ ? p_->size() : 0; }
  const uint8_t* data() const { return p_ ? p_->data() : nullptr; }
  uint8_t* data() { return p_ ? p_->data() : nullptr; }
  const uint8_t& operator[](size_t i) const { return (*p_)[i]; }
  uint8_t& operator[](size_t i) { return (*p_)[i]; }
  const_iterator begin() const { return vec().begin(); }
  const_iterator end() const { return vec().end(); }

  friend bool operator==(const Bytes& a, const Bytes& b) { return a.vec() == b.vec(); }
  friend bool operator==(const Bytes& a, const std::vector<uint8_t>& b) { return a.vec() == b; }

 private:
  static const std::vector<uint8_t>& empty_() {
    static const std::vector<uint8_t> none;
    return none;
  }
  std::unique_ptr<std::vector<uint8_t>> p_;
};

}  // namespace stagescope::events
