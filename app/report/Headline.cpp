#include "app/report/Headline.h"

#include <algorithm>

namespace stagescope::report {

namespace {

// Where the clause holding `pos` begins: after the last "; " or ". " before it (npos: none).
size_t clauseStart(const std::string& text, size_t pos) {
  const size_t semi = text.rfind("; ", pos), stop = text.rfind(". ", pos);
  if (semi == std::string::npos) return stop;
  if (stop == std::string::npos) return semi;
  return std::max(semi, stop);
}

// `text` without the clause that restates the first divergence (stated below in full).
std::string withoutFirstDivergence(std::string text, const analysis::Comparison& c) {
  if (!c.first || c.firstText.empty()) return text;
  const size_t at = text.find(c.firstText);
  if (at == std::string::npos) return text;
  const size_t start = clauseStart(text, at);
  return start == std::string::npos ? text : text.substr(0, start);
}

// `text` up to the end of the first missing record it names, the others counted (they are
// listed below).  Sets *stated to how many of c.missing the result states.
std::string firstMissingOnly(std::string text, const analysis::Comparison& c, size_t* stated) {
  *stated = 0;
  if (c.missing.empty()) return text;
  const size_t at = text.find(c.missing.front());
  if (at == std::string::npos) return text;
  *stated = 1;
  const size_t end = at + c.missing.front().size();
  if (c.missing.size() == 1 || end >= text.size()) return text;
  return text.substr(0, end) + "; " + std::to_string(c.missing.size() - 1) + " more listed below";
}

// Where to cut `text` to at most kHeadlineChars bytes: the last clause ("; ") or word
// boundary, never inside a UTF-8 sequence.
size_t cutPoint(const std::string& text) {
  size_t end = text.rfind("; ", kHeadlineChars);
  if (end == std::string::npos || end < kHeadlineChars / 2) end = text.rfind(' ', kHeadlineChars);
  if (end == std::string::npos) end = kHeadlineChars;  // one long word: cut anywhere
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

}  // namespace

Headline headlineOf(const analysis::Comparison& c, Restate restate) {
  Headline h;
  if (restate == Restate::WhileItFits && c.verdictReason.size() <= kHeadlineChars) {
    h.text = c.verdictReason;
    return h;
  }
  h.text = firstMissingOnly(withoutFirstDivergence(c.verdictReason, c), c, &h.missingStated);
  if (h.text.size() > kHeadlineChars) {
    const size_t end = cutPoint(h.text);
    size_t restStart = end;  // the boundary itself is said by the " …" and the next line
    if (h.text.compare(end, 2, "; ") == 0) restStart += 2;
    if (h.text.compare(end, 1, " ") == 0) restStart += 1;
    h.rest = h.text.substr(restStart);
    h.text = h.text.substr(0, end) + " …";
  }
  return h;
}

}  // namespace stagescope::report
