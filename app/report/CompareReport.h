// Writers of a `stagescope compare` report (analysis::Comparison): HTML, Markdown, JSON.
#pragma once

#include <string>

#include "core/analysis/Compare.h"

namespace stagescope::report {

// Writers.  write* throw std::runtime_error when the file cannot be written.
std::string renderHtml(const analysis::Comparison& c);  // one self-contained page: inline CSS + SVG
std::string renderMarkdown(const analysis::Comparison& c);
std::string renderJson(const analysis::Comparison& c);
void writeHtml(const analysis::Comparison& c, const std::string& path);
void writeMarkdown(const analysis::Comparison& c, const std::string& path);
void writeJson(const analysis::Comparison& c, const std::string& path);

}  // namespace stagescope::report
