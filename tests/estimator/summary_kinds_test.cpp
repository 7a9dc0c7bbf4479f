// Histogram, image and text summaries written and read back: the histogram against TF's
// bucketing (histogram.cc: limits 0, +-1e-12 * 1.1^k below 1e20, +-DBL_MAX; bucket i holds
// [limit[i-1], limit[i]); runs of empty buckets collapsed), the PNG decoded here chunk by chunk
// with zlib (CRCs checked, rows inflated), and the text summary as TensorBoard's text plugin
// expects it (a string tensor, plugin "text").
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "estimator/event_reader.h"
#include "estimator/summary_writer.h"
#include "ops/error.h"

namespace fs = std::filesystem;
using namespace est;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() /
           ("est_summary_kinds_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// The smallest default limit above x, from TF's recipe.
double tf_limit_above(double x) {
  std::vector<double> limits{-DBL_MAX, 0.0, DBL_MAX};
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) limits.push_back(v), limits.push_back(-v);
  double best = DBL_MAX;
  for (double l : limits)
    if (l > x && l < best) best = l;
  return best;
}

uint32_t big_endian(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

struct DecodedPng {
  uint32_t width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  std::string rows;  // inflated IDAT: a filter byte then the row's bytes, per row
};

DecodedPng decode_png(const std::string& png) {
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  DecodedPng out;
  std::string idat;
  size_t at = 8;
  std::string type;
  while (type != "IEND") {
    REQUIRE(at + 12 <= png.size());
    const uint32_t length = big_endian(png, at);
    type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, length);
    const std::string body = png.substr(at + 4, 4 + length);
    CHECK(big_endian(png, at + 8 + length) ==
          uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
    if (type == "IHDR") {
      out.width = big_endian(data, 0);
      out.height = big_endian(data, 4);
      out.bit_depth = uint8_t(data[8]);
      out.color_type = uint8_t(data[9]);
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + length;
  }
  CHECK(at == png.size());
  std::string rows(1 << 16, '\0');
  uLongf size = rows.size();
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(rows.data()), &size,
                     reinterpret_cast<const Bytef*>(idat.data()), uLong(idat.size())) == Z_OK);
  rows.resize(size);
  out.rows = rows;
  return out;
}

}  // namespace

TEST_CASE("histogram summary: TF's default buckets, empty runs collapsed, sums") {
  TempDir dir("histogram");
  const std::vector<double> values{0.0, 1.0, 1.0, -2.5, 1e-13};
  {
    SummaryWriter writer(dir.path.string());
    writer.add_histogram("weights", values, 7);
    writer.add_histogram("empty", {}, 8);
  }
  const auto events = read_summaries(event_files(dir.path.string()).at(0));
  REQUIRE(events.size() == 2);
  CHECK(events[0].tag == "weights");
  CHECK(events[0].step == 7);
  REQUIRE(events[0].kind == SummaryEvent::Kind::kHistogram);
  const Histogram& h = events[0].histogram;
  CHECK(h.min == -2.5);
  CHECK(h.max == 1.0);
  CHECK(h.num == 5);
  CHECK(h.sum == doctest::Approx(-0.5));
  CHECK(h.sum_squares == doctest::Approx(8.25));
  // The non-empty buckets, in order: -2.5 alone, 0 and 1e-13 in [0, 1e-12), the two 1.0s.
  std::vector<std::pair<double, double>> filled;
  for (size_t i = 0; i < h.bucket.size(); ++i)
    if (h.bucket[i] > 0) filled.emplace_back(h.bucket_limit[i], h.bucket[i]);
  REQUIRE(filled.size() == 3);
  CHECK(filled[0] == std::pair<double, double>{tf_limit_above(-2.5), 1});
  CHECK(filled[1] == std::pair<double, double>{1e-12, 2});
  CHECK(filled[2] == std::pair<double, double>{tf_limit_above(1.0), 2});
  // Empty runs are single entries: never two empty buckets in a row; the last ends at DBL_MAX.
  for (size_t i = 1; i < h.bucket.size(); ++i) CHECK((h.bucket[i] > 0 || h.bucket[i - 1] > 0));
  CHECK(h.bucket.size() == 7);  // empty, -2.5, empty, [0, 1e-12), empty, 1.0, empty
  CHECK(h.bucket_limit.back() == DBL_MAX);
  CHECK(h.bucket_limit[1] == tf_limit_above(-2.5));
  CHECK(h.bucket_limit[3] == 1e-12);

  const Histogram& empty = events[1].histogram;
  CHECK(empty.num == 0);
  CHECK(empty.min == DBL_MAX);
  CHECK(empty.max == -DBL_MAX);
  CHECK(empty.bucket_limit == std::vector<double>{DBL_MAX});
  CHECK(empty.bucket == std::vector<double>{0.0});
}

TEST_CASE("histogram summary: NaN and infinity are refused, naming the tag") {
  TempDir dir("histogram_nan");
  SummaryWriter writer(dir.path.string());
  CHECK_THROWS_WITH_AS(writer.add_histogram("bad", {1.0, std::nan("")}, 1),
                       doctest::Contains("'bad'"), InvalidArgumentError);
  CHECK_THROWS_AS(writer.add_histogram("bad", {HUGE_VAL}, 1), InvalidArgumentError);
}

TEST_CASE("image summary: a PNG TensorBoard decodes, per colorspace") {
  TempDir dir("image");
  // 3 x 2 RGB and 2 x 2 grayscale.
  const std::vector<uint8_t> rgb{255, 0,  0,  0,  255, 0,  0,  0,  255,
                                 10,  20, 30, 40, 50,  60, 70, 80, 90};
  const std::vector<uint8_t> gray{0, 64, 128, 255};
  {
    SummaryWriter writer(dir.path.string());
    writer.add_image("input/image/0", rgb, 3, 2, 3, 5);
    writer.add_image("mask", gray, 2, 2, 1, 5);
    CHECK_THROWS_AS(writer.add_image("bad", gray, 3, 2, 1, 5), InvalidArgumentError);
    CHECK_THROWS_AS(writer.add_image("bad", gray, 1, 1, 5, 5), InvalidArgumentError);
  }
  const auto events = read_summaries(event_files(dir.path.string()).at(0));
  REQUIRE(events.size() == 2);
  REQUIRE(events[0].kind == SummaryEvent::Kind::kImage);
  CHECK(events[0].tag == "input/image/0");
  CHECK(events[0].image_height == 3);
  CHECK(events[0].image_width == 2);
  CHECK(events[0].image_colorspace == 3);
  const DecodedPng color = decode_png(events[0].image_png);
  CHECK(color.width == 2);
  CHECK(color.height == 3);
  CHECK(color.bit_depth == 8);
  CHECK(color.color_type == 2);  // truecolor
  std::string expected;
  for (int row = 0; row < 3; ++row) {
    expected.push_back('\0');
    for (int i = 0; i < 6; ++i) expected.push_back(char(rgb[size_t(row * 6 + i)]));
  }
  CHECK(color.rows == expected);

  CHECK(events[1].image_colorspace == 1);
  const DecodedPng mono = decode_png(events[1].image_png);
  CHECK(mono.color_type == 0);  // grayscale
  CHECK(mono.rows == std::string("\0\0\x40\0\x80\xff", 6));
}

TEST_CASE("text summary: a scalar string tensor for TensorBoard's text plugin") {
  TempDir dir("text");
  {
    SummaryWriter writer(dir.path.string());
    writer.add_text("notes", "learning rate **0.1**", 3);
    writer.add_scalar("loss", 0.25, 3);
  }
  const auto events = read_summaries(event_files(dir.path.string()).at(0));
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == SummaryEvent::Kind::kText);
  CHECK(events[0].plugin_name == "text");
  CHECK(events[0].text == "learning rate **0.1**");
  CHECK(events[0].step == 3);
  CHECK(events[1].kind == SummaryEvent::Kind::kScalar);
  CHECK(events[1].scalar == 0.25);
  // Scalars read the old way are unaffected by the other kinds.
  CHECK(read_events(event_files(dir.path.string()).at(0)).size() == 1);
}
