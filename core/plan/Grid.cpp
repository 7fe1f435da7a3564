// HyperCommGrid semantics (schedule.md §1): first name fastest, contiguous ranks from offset.
#include "core/plan/Grid.h"

#include <algorithm>
#include <stdexcept>

namespace stagescope::plan {
namespace {

std::string listText(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string namesText(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out + "]";
}

}  // namespace

Grid::Grid(std::vector<int> shape, std::vector<std::string> names, int offset, int worldSize)
    : shape_(std::move(shape)), names_(std::move(names)), offset_(offset) {
  if (shape_.size() != names_.size()) {
    throw std::invalid_argument("grid shape " + listText(shape_) + " and names " +
                                namesText(names_) + " differ in length");
  }
  if (offset_ < 0) {
    throw std::invalid_argument("grid rank offset " + std::to_string(offset_) + " is negative");
  }
  long long size = 1;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] < 1) {
      throw std::invalid_argument("grid dimension " + names_[i] + " = " +
                                  std::to_string(shape_[i]) + " must be >= 1");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names_[i] == names_[j]) {
        throw std::invalid_argument("grid dimension name " + names_[i] + " appears twice");
      }
    }
    // Checked: a product past the available ranks is an error whatever it is exactly.
    if (__builtin_mul_overflow(size, static_cast<long long>(shape_[i]), &size)) {
      throw std::invalid_argument("grid shape " + listText(shape_) +
                                  " holds more ranks than 64-bit arithmetic counts");
    }
  }
  if (size > static_cast<long long>(worldSize) - offset_) {
    throw std::invalid_argument(
        "grid shape " + listText(shape_) + " holds " + std::to_string(size) +
        " ranks but only world_size - offset = " + std::to_string(worldSize) + " - " +
        std::to_string(offset_) + " are available");
  }
  size_ = static_cast<int>(size);
}

int Grid::dimSize(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) {
    throw std::invalid_argument("unknown grid dimension " + name + " (names " + namesText(names_) +
                                ")");
  }
  return shape_[it - names_.begin()];
}

std::vector<int> Grid::coords(int rank) const {
  if (!contains(rank)) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not in the grid (ranks " +
                                std::to_string(offset_) + ".." +
                                std::to_string(offset_ + size_ - 1) + ")");
  }
  std::vector<int> out(shape_.size());
  int rest = rank - offset_;
  for (size_t i = 0; i < shape_.size(); ++i) {
    out[i] = rest % shape_[i];
    rest /= shape_[i];
  }
  return out;
}

int Grid::coord(int rank, const std::string& name) const {
  dimSize(name);  // validates the name
  auto idx = std::find(names_.begin(), names_.end(), name) - names_.begin();
  return coords(rank)[idx];
}

int Grid::rankOf(const std::vector<int>& c) const {
  if (c.size() != shape_.size()) {
    throw std::invalid_argument("coordinates " + listText(c) + " do not match grid shape " +
                                listText(shape_));
  }
  int rank = 0;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (c[i] < 0 || c[i] >= shape_[i]) {
      throw std::invalid_argument("coordinate " + names_[i] + " = " + std::to_string(c[i]) +
                                  " is outside 0.." + std::to_string(shape_[i] - 1));
    }
    rank = rank * shape_[i] + c[i];
  }
  return offset_ + rank;
}

std::vector<std::vector<int>> Grid::rawEnumeration(const std::vector<std::string>& dims) const {
  std::vector<size_t> inner;  // indices of `dims`, first = slowest
  for (const auto& d : dims) {
    dimSize(d);
    size_t idx = std::find(names_.begin(), names_.end(), d) - names_.begin();
    if (std::find(inner.begin(), inner.end(), idx) != inner.end()) {
      throw std::invalid_argument("grid dimension " + d + " listed twice");
    }
    inner.push_back(idx);
  }
  std::vector<size_t> outer;  // remaining dims in reversed-names order, first = slowest
  for (size_t i = names_.size(); i-- > 0;) {
    if (std::find(inner.begin(), inner.end(), i) == inner.end()) outer.push_back(i);
  }
  // Mixed-radix counter over `axes` (first slowest); calls f(coords) for each combination.
  auto forEach = [&](const std::vector<size_t>& axes, std::vector<int>& c, auto&& f) {
    for (size_t a : axes) c[a] = 0;
    while (true) {
      f();
      size_t k = axes.size();
      while (k > 0) {
        size_t a = axes[k - 1];
        if (++c[a] < shape_[a]) break;
        c[a] = 0;
        --k;
      }
      if (k == 0) return;
    }
  };
  std::vector<std::vector<int>> groups;
  std::vector<int> c(shape_.size(), 0);
  forEach(outer, c, [&] {
    std::vector<int> group;
    forEach(inner, c, [&] { group.push_back(rankOf(c)); });
    groups.push_back(std::move(group));
  });
  return groups;
}

std::vector<std::string> Grid::orderDims(const std::vector<std::string>& dims) const {
  std::vector<std::string> ordered = dims;
  auto pos = [&](const std::string& d) {
    dimSize(d);
    return std::find(names_.begin(), names_.end(), d) - names_.begin();
  };
  std::sort(ordered.begin(), ordered.end(),
            [&](const std::string& a, const std::string& b) { return pos(a) > pos(b); });
  return ordered;
}

std::vector<std::vector<int>> Grid::groupEnumeration(const std::vector<std::string>& dims) const {
  return rawEnumeration(orderDims(dims));
}

std::string Grid::groupKey(const std::vector<std::string>& dims) const {
  std::string key;
  for (const auto& d : orderDims(dims)) key += (key.empty() ? "" : "-") + d;
  return key;
}

std::vector<int> Grid::groupOf(const std::vector<std::string>& dims, int rank) const {
  if (!contains(rank)) return {};
  for (auto& group : groupEnumeration(dims)) {
    if (std::find(group.begin(), group.end(), rank) != group.end()) return group;
  }
  return {};
}

Grid moduleGrid(int tp, int cp, int pp, int dp, int offset, int worldSize) {
  return Grid({tp, cp, pp, dp}, {"tp", "cp", "pp", "dp"}, offset, worldSize);
}

}  // namespace stagescope::plan
