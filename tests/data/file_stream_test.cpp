// InputStream: reads of a buffer or more go straight into the caller's memory (no copy through
// the stream's buffer, issue 32 item 5); mixed with small buffered reads, seeks and the end of
// the data they must give the file's bytes and offsets exactly, and damage must still be a
// DataLossError, for plain, gzip (also concatenated members) and zlib files.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "data/file_stream.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

// Bytes that compress somewhat (runs of a counter between random ones), so inflating them
// takes many calls.
std::string payload(size_t size, uint32_t seed) {
  std::string bytes(size, '\0');
  uint32_t state = seed;
  for (size_t i = 0; i < size; ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = (i / 64) % 3 == 0 ? static_cast<char>(i / 7) : static_cast<char>(state >> 24);
  }
  return bytes;
}

std::string compress(const std::string& bytes, Compression compression) {
  std::string path = scratch_file("compress.tmp");
  {
    OutputStream out(path, compression);
    out.write(bytes);
    out.close();
  }
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = scratch_file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Reads the whole stream in the given pattern of read sizes (cycled) and checks every piece
// and offset against `expected`.
void check_reads(InputStream& in, const std::string& expected, const std::vector<size_t>& sizes) {
  size_t at = 0;
  for (size_t i = 0; at < expected.size(); ++i) {
    size_t want = sizes[i % sizes.size()];
    std::string piece(want, '\xAA');
    size_t got = in.read(piece.data(), want);
    CAPTURE(at);
    CAPTURE(want);
    REQUIRE(got == std::min(want, expected.size() - at));
    CHECK(piece.compare(0, got, expected, at, got) == 0);
    at += got;
    CHECK(in.offset() == at);
  }
  char extra;
  CHECK(in.read(&extra, 1) == 0);
  CHECK(in.offset() == expected.size());
}

}  // namespace

TEST_CASE("InputStream: large reads straight into memory give the same bytes and offsets") {
  const std::string bytes = payload(300000, 7);
  // Buffer 4096: reads of 4096 or more bypass it; smaller ones go through it, so every pattern
  // mixes both, and a direct read may start with bytes still in the buffer.
  const std::vector<std::vector<size_t>> patterns = {
      {300000}, {4096}, {4095, 4097}, {1, 10000, 3, 70000}, {5000, 100, 4096, 12}};
  for (Compression compression : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    CAPTURE(compression_name(compression));
    std::string path =
        write_file("stream_" + std::string(compression_name(compression)),
                   compression == Compression::kNone ? bytes : compress(bytes, compression));
    for (const auto& sizes : patterns) {
      InputStream in(path, compression, 4096);
      check_reads(in, bytes, sizes);
    }
  }
}

TEST_CASE("InputStream: seeks after a direct read, and gzip members across one") {
  const std::string first = payload(100000, 1), second = payload(50000, 2);
  const std::string path = write_file(
      "members.gz", compress(first, Compression::kGzip) + compress(second, Compression::kGzip));
  const std::string all = first + second;
  InputStream in(path, Compression::kGzip, 4096);
  // One read over the boundary between the two members.
  std::string head(120000, '\0');
  REQUIRE(in.read(head.data(), head.size()) == head.size());
  CHECK(head == all.substr(0, 120000));
  // Back (a rewind of the compressed file), a small read, forward, and the rest.
  in.seek(99990);
  char small[20];
  REQUIRE(in.read(small, 20) == 20);
  CHECK(std::string(small, 20) == all.substr(99990, 20));
  in.seek(140000);
  std::string rest(20000, '\0');
  CHECK(in.read(rest.data(), rest.size()) == all.size() - 140000);
  CHECK(rest.substr(0, all.size() - 140000) == all.substr(140000));
  CHECK(in.offset() == all.size());

  std::string plain = write_file("plain.bin", all);
  InputStream raw(plain, Compression::kNone, 4096);
  std::string block(50000, '\0');
  REQUIRE(raw.read(block.data(), block.size()) == block.size());
  raw.seek(10);  // before the direct read: outside the (empty) buffer, so a real seek
  REQUIRE(raw.read(small, 20) == 20);
  CHECK(std::string(small, 20) == all.substr(10, 20));
  CHECK(raw.offset() == 30);
}

TEST_CASE("InputStream: a truncated or corrupt gzip file fails a direct read with DataLossError") {
  const std::string bytes = payload(300000, 3);
  const std::string gz = compress(bytes, Compression::kGzip);
  std::string cut = write_file("cut.gz", gz.substr(0, gz.size() / 2));
  std::string message = error_message<DataLossError>([&] {
    InputStream in(cut, Compression::kGzip, 4096);
    std::string all(bytes.size(), '\0');
    in.read(all.data(), all.size());
  });
  CHECK(contains(message, "truncated"));
  CHECK(contains(message, "cut.gz"));

  std::string damaged_bytes = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) damaged_bytes[i] ^= 0x5A;
  std::string damaged = write_file("damaged.gz", damaged_bytes);
  message = error_message<DataLossError>([&] {
    InputStream in(damaged, Compression::kGzip, 4096);
    std::string all(2 * bytes.size(), '\0');  // on to the trailer, whatever the damage decodes to
    in.read(all.data(), all.size());
  });
  CHECK(contains(message, "damaged.gz"));
}
