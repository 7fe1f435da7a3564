// "Did you mean ...?" for a mistyped name (a command, a config key): the one place that decides
// what counts as close enough.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stagescope::events {

// The number of single-byte insertions, deletions, substitutions and swaps of two adjacent
// bytes that turn `a` into `b` (optimal string alignment distance).
size_t editDistance(std::string_view a, std::string_view b);

// The candidate closest to `word`, when it is close enough to be what was meant: at most 1 edit
// for a word of up to 4 bytes, 2 up to 8 bytes, 3 beyond; ties go to the earlier candidate.
// Never `word` itself, and nothing for a word longer than 64 bytes (no name is that long).
std::optional<std::string> closestName(std::string_view word,
                                       const std::vector<std::string>& candidates);

// "; did you mean 'NAME'?" with closestName's answer, or "" when there is none.
std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace stagescope::events
