// Histogram buckets and PNG encoding for summaries (see summary_encoding.h). The PNG writer is
// the smallest that TensorBoard reads: IHDR, one IDAT holding every row with filter type 0
// (none), IEND; CRCs and deflate from zlib.
#include "estimator/summary_encoding.h"

#include <zlib.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include <fmt/format.h>

#include "ops/error.h"

namespace est {
namespace {

std::vector<double> make_default_limits() {
  std::vector<double> positive;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
  positive.push_back(DBL_MAX);
  std::vector<double> limits;
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) limits.push_back(-*it);
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char((v >> shift) & 0xff));
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, static_cast<uint32_t>(
                   crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

}  // namespace

const std::vector<double>& default_histogram_bucket_limits() {
  static const std::vector<double> limits = make_default_limits();
  return limits;
}

Histogram histogram_of(const std::vector<double>& values, const std::string& tag) {
  const std::vector<double>& limits = default_histogram_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (double v : values) {
    if (!std::isfinite(v))
      throw InvalidArgumentError(fmt::format(
          "summary histogram '{}': the values hold {}; TensorFlow refuses NaN and infinity "
          "in a histogram too (check the tensor for divergence)",
          tag, v));
    counts[size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin())] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0) {  // a run of empty buckets becomes one, ending at the run's last limit
      while (i < counts.size() && counts[i] <= 0) end = limits[i++];
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

std::string encode_png(const std::vector<uint8_t>& pixels, int64_t height, int64_t width,
                       int channels) {
  if (channels < 1 || channels > 4 || height < 1 || width < 1 ||
      pixels.size() != size_t(height * width * channels))
    throw InvalidArgumentError(fmt::format(
        "encode_png: {} bytes do not form a [height {}, width {}, channels {}] image (channels "
        "1 to 4, sizes positive)",
        pixels.size(), height, width, channels));
  static constexpr uint8_t kColorType[] = {0, 0, 4, 2, 6};  // gray, gray+alpha, RGB, RGBA
  std::string rows;
  const size_t row_bytes = size_t(width * channels);
  rows.reserve(size_t(height) * (row_bytes + 1));
  for (int64_t y = 0; y < height; ++y) {
    rows.push_back('\0');  // filter type 0
    rows.append(reinterpret_cast<const char*>(pixels.data()) + size_t(y) * row_bytes, row_bytes);
  }
  uLongf compressed_size = compressBound(uLong(rows.size()));
  std::string compressed(compressed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(compressed.data()), &compressed_size,
                reinterpret_cast<const Bytef*>(rows.data()), uLong(rows.size()),
                Z_DEFAULT_COMPRESSION) != Z_OK)
    throw InternalError("encode_png: zlib could not deflate the image rows");
  compressed.resize(compressed_size);

  std::string header;
  put_u32(header, uint32_t(width));
  put_u32(header, uint32_t(height));
  header.push_back(char(8));  // bit depth
  header.push_back(char(kColorType[channels]));
  header.append(3, '\0');  // compression, filter, interlace
  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", compressed);
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace est
