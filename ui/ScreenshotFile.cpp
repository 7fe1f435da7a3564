#include "ui/ScreenshotFile.h"

#include <stb/stb_image_write.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>

#include "storage/TextFile.h"

namespace stagescope::ui {
namespace {

void appendBigEndian32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// One PNG chunk: length, type, data, CRC-32 of type + data (PNG specification, section 5.3).
std::string chunk(const char type[4], const std::string& data) {
  std::string typeAndData(type, 4);
  typeAndData += data;
  std::string out;
  appendBigEndian32(out, static_cast<uint32_t>(data.size()));
  out += typeAndData;
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(typeAndData.data()),
                         static_cast<uInt>(typeAndData.size()));
  appendBigEndian32(out, static_cast<uint32_t>(crc));
  return out;
}

void appendBytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data),
                                             static_cast<size_t>(size));
}

// Signature (8 bytes) then IHDR: length (4), type (4), 13 data bytes, CRC (4).
constexpr size_t kAfterIhdr = 8 + 4 + 4 + 13 + 4;

}  // namespace

std::string encodePng(const unsigned char* rgba, int width, int height) {
  std::string png;
  if (!stbi_write_png_to_func(appendBytes, &png, width, height, 4, rgba, width * 4) ||
      png.size() < kAfterIhdr || png.compare(12, 4, "IHDR") != 0)
    return {};
  std::string text = "Software";
  text.push_back('\0');
  text += kScreenshotSoftware;
  png.insert(kAfterIhdr, chunk("tEXt", text));
  return png;
}

void writeScreenshotFiles(const std::string& path, const std::string& png,
                          const std::string& probes) {
  {
    report::AtomicFile file(path);
    file.write(png.data(), png.size());
    file.commit();
  }
  report::writeTextFile(path + ".probes", probes);
}

}  // namespace stagescope::ui
