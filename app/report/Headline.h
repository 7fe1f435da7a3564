// The verdict's one-line statement at the top of a comparison report (Markdown, HTML): the
// verdict reason analysis::compareRuns wrote, kept to kHeadlineChars, with nothing said twice.
//
// The reason restates what sections below the headline state in full: the first divergence
// (its own line / card) and the missing records (their own list).  A headline that leaves them
// to those sections is short and says each thing once:
//   - the clause that restates the first divergence is left out;
//   - of the missing records, the first is kept and the rest counted ("; 8 more listed below"),
//     the list below starting after the ones the headline states (Headline::missingStated);
//   - a reason still longer than the limit is cut at a clause or word boundary and ends in
//     "…"; the report states the rest right below it (Headline::rest).
#pragma once

#include <cstddef>
#include <string>

#include "core/analysis/Compare.h"

namespace stagescope::report {

// The most bytes of reason a headline holds: with "**Verdict: EQUAL WITHIN TOLERANCE** — " the
// Markdown line stays under about 200 characters.
inline constexpr size_t kHeadlineChars = 160;

struct Headline {
  std::string text;          // at most kHeadlineChars bytes, then " …" when cut
  std::string rest;          // the rest of a cut headline (empty: nothing was cut)
  size_t missingStated = 0;  // c.missing[0, missingStated) are stated in `text` and `rest`
};

// Whether the headline may restate what a section below states, as long as the whole reason
// fits the limit (Markdown: the text a terminal or PR comment shows first), or never (HTML).
enum class Restate { WhileItFits, Never };

Headline headlineOf(const analysis::Comparison& c, Restate restate);

}  // namespace stagescope::report
