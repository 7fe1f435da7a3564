#include "app/report/TextFile.h"

#include <fstream>
#include <stdexcept>

namespace stagescope::report {

void writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write '" + path + "': could not open the file");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw std::runtime_error("cannot write '" + path + "': write failed");
}

}  // namespace stagescope::report
