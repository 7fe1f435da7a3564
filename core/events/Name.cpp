#include "core/events/Name.h"

#include <deque>
#include <mutex>
#include <ostream>
#include <shared_mutex>
#include <unordered_map>

namespace stagescope::events {
namespace {

// The process-wide pool: every distinct non-empty text once, at a stable address (a deque
// never moves its elements), indexed by its content.  Allocated once and never destroyed, so
// Names held by static objects stay valid during static destruction.
struct NamePool {
  std::shared_mutex mutex;
  std::deque<std::string> texts;
  std::unordered_map<std::string_view, const std::string*> index;  // views into `texts`
};

NamePool& pool() {
  static NamePool* p = new NamePool;
  return *p;
}

}  // namespace

Name::Name(std::string_view text) {
  if (text.empty()) return;
  NamePool& p = pool();
  {
    std::shared_lock lock(p.mutex);
    if (auto it = p.index.find(text); it != p.index.end()) {
      text_ = it->second;
      return;
    }
  }
  std::unique_lock lock(p.mutex);
  if (auto it = p.index.find(text); it != p.index.end()) {  // another thread was first
    text_ = it->second;
    return;
  }
  const std::string& stored = p.texts.emplace_back(text);
  p.index.emplace(std::string_view(stored), &stored);  // keyed on the stored copy
  text_ = &stored;
}

const std::string& Name::empty_() {
  static const std::string* e = new std::string;
  return *e;
}

size_t Name::poolSize() {
  NamePool& p = pool();
  std::shared_lock lock(p.mutex);
  return p.texts.size();
}

std::ostream& operator<<(std::ostream& os, const Name& n) {
  return os << n.str();
}

}  // namespace stagescope::events
