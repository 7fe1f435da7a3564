// The viewer's screenshot files: a PNG that says it is ours, written so that nothing is lost.
//
// Contract: encodePng returns a complete PNG of an RGBA image (rows top to bottom, 4 bytes per
// pixel) with a tEXt chunk "Software" = "stagescope viewer" right after IHDR, so that an
// earlier screenshot can be told from any other PNG by its content (the output policy
// replaces only its own kind).  writeScreenshotFiles writes the PNG and its ".probes" text
// through temporary files renamed over the targets (report::AtomicFile): a full disk or a
// signal leaves each target as it was or complete.  Whether the paths may be written at all is
// decided before the viewer starts (storage/OutputPolicy: claimScreenshotOutputs).
#pragma once

#include <string>

namespace stagescope::ui {

// The text a screenshot carries in its tEXt chunk (keyword "Software").
inline constexpr const char* kScreenshotSoftware = "stagescope viewer";

// PNG bytes of `rgba` (width x height, stride width*4); empty when encoding failed.
std::string encodePng(const unsigned char* rgba, int width, int height);

// Writes `png` to `path` and `probes` to `path + ".probes"`; throws std::runtime_error naming
// the file and the system's reason.
void writeScreenshotFiles(const std::string& path, const std::string& png,
                          const std::string& probes);

}  // namespace stagescope::ui
