#include "ui/RunFileWriter.h"

#include <filesystem>
#include <stdexcept>

#if STAGESCOPE_UI_HAVE_WRITER
#include "storage/Merge.h"
#include "storage/ShardWriter.h"
#endif

namespace stagescope::ui {

void writeRunFile(const storage::RunModel& model, const std::string& path) {
#if STAGESCOPE_UI_HAVE_WRITER
  std::error_code ec;
  std::filesystem::remove(path, ec);
  for (const auto& s : storage::findShards(path)) std::filesystem::remove(s, ec);
  events::RunInfo info = model.info;
  info.status = events::RunStatus::Running;
  storage::createRunFile(path, info);
  std::vector<std::string> shards;
  const int world = static_cast<int>(model.ranks.size());
  for (int r = 0; r < world; ++r) {
    shards.push_back(storage::shardPathFor(path, r));
    auto w = storage::ShardWriter::open(shards.back(), model.info.level, r);
    w->rank(model.ranks[r]);
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
    w->close();
    if (!w->error().empty()) throw std::runtime_error(path + ": " + w->error());
  }
  auto result = storage::mergeShards(path, shards);
  if (!result.ok()) throw std::runtime_error(path + ": merge failed");
  storage::updateRunStatus(path, model.info.status, model.info.statusReason, model.info.endUnixMs);
  for (const auto& s : shards) std::filesystem::remove(s, ec);
#else
  (void)model;
  throw std::runtime_error(path + ": the storage writer is not built");
#endif
}

}  // namespace stagescope::ui
