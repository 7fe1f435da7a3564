// Small builders shared by the plan tests.
#pragma once

#include <string>

#include "core/plan/Config.h"

namespace stagescope::plan::testing {

// TOML of one [[modules]] table.
inline std::string moduleToml(const std::string& name, const std::string& kind, int tp, int pp,
                              int dp, int offset, int layers) {
  return "[[modules]]\nname = \"" + name + "\"\nkind = \"" + kind +
         "\"\ntp = " + std::to_string(tp) + "\npp = " + std::to_string(pp) +
         "\ndp = " + std::to_string(dp) + "\noffset = " + std::to_string(offset) +
         "\nlayers = " + std::to_string(layers) + "\n";
}

// A run config of `modules` (TOML text of [[modules]] tables) with m microbatches.
inline RunConfig makeConfig(const std::string& modules, int microbatches, int mbs = 4,
                            bool forwardOnly = false) {
  std::string text = "microbatches = " + std::to_string(microbatches) +
                     "\nmicro_batch_size = " + std::to_string(mbs) +
                     "\nforward_only = " + (forwardOnly ? "true" : "false") + "\n" + modules;
  return parseConfig(text, "test.toml");
}

// A plain llm-only pipeline with pp stages (tp = dp = 1).
inline RunConfig llmOnly(int pp, int microbatches) {
  return makeConfig(moduleToml("llm", "llm", 1, pp, 1, 0, pp), microbatches);
}

}  // namespace stagescope::plan::testing
