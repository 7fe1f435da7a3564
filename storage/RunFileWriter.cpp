#include "storage/RunFileWriter.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "storage/Merge.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage {

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
  for (int r = 0; r < world; ++r) {
    auto w = ShardWriter::open(shards[r], model.info.level, r);
    for (const auto& row : model.modulesOf(r)) w->rank(row);
    if (r < static_cast<int>(model.plan.size()))
      for (const auto& a : model.plan[r]) w->planned(a);
    if (r < static_cast<int>(model.actions.size()))
      for (const auto& a : model.actions[r]) w->action(a);
    for (const auto& t : model.transfers)
      if (t.rank == r) w->transfer(t);
    for (const auto& g : model.gradients)
      if (g.rank == r) w->gradient(g);
    for (const auto& l : model.losses)
      if (l.rank == r) w->loss(l);
    for (const auto& d : model.diagnoses)
      if (d.rank == r) w->diagnosis(d);
    for (const auto& wait : model.waits)
      if (wait.rank == r) w->wait(wait);
    for (const auto& step : model.moduleSteps)
      if (step.rank == r) w->moduleStep(step);
    w->close();
    if (!w->error().empty()) throw std::runtime_error(shards[r] + ": " + w->error());
  }
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
