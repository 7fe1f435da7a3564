// HyperCommGrid semantics (schedule.md §1) without any process group: named dimensions,
// first name fastest, a contiguous rank range starting at `offset`.  Torch-free; the engine
// turns enumerations into c10d groups (core/engine/GridGroups).
#pragma once

#include <string>
#include <vector>

namespace stagescope::plan {

class Grid {
 public:
  // Throws std::invalid_argument naming the value when: shape/names lengths differ,
  // offset < 0, a size < 1, duplicate names, or prod(shape) > worldSize - offset.
  Grid(std::vector<int> shape, std::vector<std::string> names, int offset, int worldSize);

  int size() const { return size_; }
  int offset() const { return offset_; }
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& names() const { return names_; }
  bool contains(int rank) const { return rank >= offset_ && rank < offset_ + size_; }
  int dimSize(const std::string& name) const;  // throws if unknown
  std::vector<int> coords(int rank) const;     // in names order; throws if not a member
  int coord(int rank, const std::string& name) const;
  int rankOf(const std::vector<int>& coords) const;

  // Raw enumeration (reference _gen_rank_enum): one list per combination of the remaining
  // dims (slowest = last name); inside a list the first entry of `dims` is the slowest axis.
  std::vector<std::vector<int>> rawEnumeration(const std::vector<std::string>& dims) const;
  // What create_pg uses: dims re-ordered to reversed-names order first, so every list is
  // ascending.  Key = those names joined by "-" (e.g. {"tp","dp"} -> "dp-tp").
  std::vector<std::vector<int>> groupEnumeration(const std::vector<std::string>& dims) const;
  std::string groupKey(const std::vector<std::string>& dims) const;
  // The list of groupEnumeration(dims) that contains `rank` (empty if not a member).
  std::vector<int> groupOf(const std::vector<std::string>& dims, int rank) const;

 private:
  std::vector<std::string> orderDims(const std::vector<std::string>& dims) const;
  std::vector<int> shape_;
  std::vector<std::string> names_;
  int offset_ = 0;
  int size_ = 0;
};

// The standard module grid: shape [tp, cp, pp, dp] with those names.
Grid moduleGrid(int tp, int cp, int pp, int dp, int offset, int worldSize);

}  // namespace stagescope::plan
