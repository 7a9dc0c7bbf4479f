// What a memory cache of a file source holds once complete: the recorded rows alone, in chunks
// cut to the rows they hold, without the decoded file it was filled from (issue 32, item 3).
#include <doctest/doctest.h>
#include <zlib.h>

#include <filesystem>

#include "data/idx.h"
#include "ops/allocator.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::drain;
using est::testing::scratch_file;

namespace {

constexpr uint32_t kRows = 2000;  // 28x28 images: 6.3 MB as float32, under one 8 MiB chunk

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(out);
}

std::string mnist_dir() {
  std::string dir = scratch_file("cache_memory");
  std::filesystem::create_directories(dir);
  std::string images = be32(0x803) + be32(kRows) + be32(28) + be32(28);
  for (uint32_t i = 0; i < kRows * 784; ++i) images.push_back(static_cast<char>(i % 251));
  std::string labels = be32(0x801) + be32(kRows);
  for (uint32_t i = 0; i < kRows; ++i) labels.push_back(static_cast<char>(i % 10));
  write_gz(dir + "/train-images-idx3-ubyte.gz", images);
  write_gz(dir + "/train-labels-idx1-ubyte.gz", labels);
  return dir;
}

int64_t in_use() { return ops::memory_stats().bytes_in_use; }

}  // namespace

TEST_CASE("a complete memory cache of mnist holds its rows alone, and the source reloads") {
  const std::string dir = mnist_dir();
  const int64_t recorded = int64_t{kRows} * (784 * 4 + 8);  // float32 images, int64 labels
  const int64_t before = in_use();
  Dataset source = mnist(dir, "train");
  Dataset cached = source.map(scale).cache();
  {
    Iterator it = cached.iterator();
    int64_t rows = 0;
    while (it.next()) ++rows;  // the pass completes the cache
    CHECK(rows == kRows);
  }
  // Before: the decoded uint8 file (1.5 MB) and a whole 8 MiB chunk stayed in use.
  const int64_t held = in_use() - before;
  CHECK(held >= recorded);
  CHECK(held <= recorded + recorded / 8 + 4096);  // the allocator's size classes: <= 12.5 %

  // The next epoch reads the recording; the source, read again, loads its file again.
  std::vector<Element> again = drain(cached);
  REQUIRE(again.size() == kRows);
  CHECK(again[kRows - 1].labels.item() == (kRows - 1) % 10);
  std::vector<Element> raw = drain(source);
  REQUIRE(raw.size() == kRows);
  CHECK(raw[1].features.at("image").to_vector<int64_t>()[0] == 784 % 251);
  CHECK(again[1].features.at("image").to_vector<float>()[0] == (784 % 251) / 255.0f);
}
