#include "storage/RunFileWriter.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "storage/Merge.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage {

namespace {

// Hands each record of `records` whose rank is `rank` to `add`.
template <typename Records, typename Add>
void forRank(const Records& records, int rank, Add add) {
  for (const auto& x : records)
    if (x.rank == rank) add(x);
}

// Rank `r`'s shard: its rows of every per-rank table, as its writer would have recorded them.
void writeRankShard(const model::RunModel& model, int r, const std::string& shard) {
  auto w = ShardWriter::open(shard, model.info.level, r);
  for (const auto& row : model.modulesOf(r)) w->rank(row);
  if (r < static_cast<int>(model.plan.size()))
    for (const auto& a : model.plan[r]) w->planned(a);
  if (r < static_cast<int>(model.actions.size()))
    for (const auto& a : model.actions[r]) w->action(a);
  forRank(model.transfers, r, [&](const auto& t) { w->transfer(t); });
  forRank(model.gradients, r, [&](const auto& g) { w->gradient(g); });
  forRank(model.losses, r, [&](const auto& l) { w->loss(l); });
  forRank(model.diagnoses, r, [&](const auto& d) { w->diagnosis(d); });
  forRank(model.waits, r, [&](const auto& x) { w->wait(x); });
  forRank(model.injectedFaults, r, [&](const auto& f) { w->injectedFault(f); });
  forRank(model.moduleSteps, r, [&](const auto& s) { w->moduleStep(s); });
  forRank(model.messageRoles, r, [&](const auto& x) { w->messageRole(x); });
  w->close();
  if (!w->error().empty()) throw std::runtime_error(shard + ": " + w->error());
}

}  // namespace

void writeRunFile(const model::RunModel& model, const std::string& path) {
  // One shard per rank; a colocated rank's shard holds one `ranks` row per module it holds.
  int world = static_cast<int>(std::max(model.actions.size(), model.plan.size()));
  for (const auto& r : model.ranks) world = std::max(world, r.rank + 1);
  std::vector<std::string> shards;
  for (int r = 0; r < world; ++r) shards.push_back(shardPathFor(path, r));
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    throw std::runtime_error(path + ": exists; writeRunFile creates new run files only");
  for (const auto& s : shards)
    if (std::filesystem::exists(s, ec))
      throw std::runtime_error(s + ": exists; writeRunFile creates new shards only");
  events::RunInfo info = model.info;
  info.status = events::RunStatus::Running;
  createRunFile(path, info);
  for (int r = 0; r < world; ++r) writeRankShard(model, r, shards[r]);
  // Run-wide diagnoses (rank -1, as the launcher writes them) travel in a shard of their own.
  bool launcher = false;
  for (const auto& d : model.diagnoses) launcher |= d.rank < 0 || d.rank >= world;
  if (launcher) {
    shards.push_back(path + ".launcher.shard");
    if (std::filesystem::exists(shards.back(), ec))
      throw std::runtime_error(shards.back() + ": exists; writeRunFile creates new shards only");
    auto w = ShardWriter::open(shards.back(), events::RecordLevel::Meta, -1);
    for (const auto& d : model.diagnoses)
      if (d.rank < 0 || d.rank >= world) w->diagnosis(d);
    w->close();
    if (!w->error().empty()) throw std::runtime_error(shards.back() + ": " + w->error());
  }
  // The reference (as `run --reference` writes it) travels in a shard of its own.
  if (!model.referenceGradients.empty() || !model.referenceLosses.empty()) {
    shards.push_back(path + ".reference.shard");
    if (std::filesystem::exists(shards.back(), ec))
      throw std::runtime_error(shards.back() + ": exists; writeRunFile creates new shards only");
    auto w = ShardWriter::open(shards.back(), events::RecordLevel::Full, -1);
    for (const auto& g : model.referenceGradients) w->referenceGradient(g);
    for (const auto& l : model.referenceLosses) w->referenceLoss(l);
    w->close();
    if (!w->error().empty()) throw std::runtime_error(shards.back() + ": " + w->error());
  }
  auto result = mergeShards(path, shards);
  if (!result.ok()) throw std::runtime_error(path + ": merge failed");
  updateRunStatus(path, model.info.status, model.info.statusReason, model.info.endUnixMs);
  for (const auto& s : shards) std::filesystem::remove(s, ec);
}

}  // namespace stagescope::storage
