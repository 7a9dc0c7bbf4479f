// CRC32C, TFRecord framing (against bytes computed here with a bitwise reference CRC), GZIP and
// ZLIB files (cross-checked with zlib's own gz API), corrupt input, and tfrecord_dataset.
#include <doctest/doctest.h>
#include <zlib.h>

#include <fstream>
#include <random>

#include "data/crc32c.h"
#include "data/tfrecord.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

// The CRC32C definition, one bit at a time (reflected polynomial 0x82F63B78): an independent
// reference for the library.
uint32_t reference_crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t reference_mask(uint32_t crc) {
  uint32_t rotated = (crc >> 15) | (crc << 17);
  return rotated + 0xa282ead8u;
}

std::string le(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<std::string> sample_records() {
  std::mt19937 rng(3);
  std::vector<std::string> records{"", "a", std::string(1000, 'x')};
  std::string big(300000, '\0');  // crosses the 256 KiB stream buffer
  for (char& c : big) c = static_cast<char>(rng());
  records.push_back(big);
  records.push_back("tail");
  return records;
}

std::vector<std::string> read_all(const std::string& path, Compression compression) {
  TFRecordReader reader(path, compression);
  std::vector<std::string> out;
  std::string record;
  while (reader.read(record)) out.push_back(record);
  return out;
}

}  // namespace

TEST_CASE("CRC32C matches the check value and a bitwise reference") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(reference_crc32c("123456789") == 0xE3069283u);
  std::mt19937 rng(1);
  for (size_t length : {0, 1, 7, 8, 15, 64, 1000, 4099}) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    CHECK(crc32c(bytes.data(), bytes.size()) == reference_crc32c(bytes));
    size_t half = length / 2;
    CHECK(crc32c_extend(crc32c(bytes.data(), half), bytes.data() + half, length - half) ==
          reference_crc32c(bytes));
  }
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) {
    CHECK(mask_crc(crc) == reference_mask(crc));
    CHECK(unmask_crc(mask_crc(crc)) == crc);
  }
}

TEST_CASE("a TFRecord file is length, masked CRC of the length, data, masked CRC of the data") {
  std::string path = scratch_file("framing.tfrecord");
  {
    TFRecordWriter writer(path);
    writer.write("abc");
    writer.write("");
    writer.close();
  }
  std::string length3 = le(3, 8), length0 = le(0, 8);
  std::string expected = length3 + le(reference_mask(reference_crc32c(length3)), 4) + "abc" +
                         le(reference_mask(reference_crc32c("abc")), 4) + length0 +
                         le(reference_mask(reference_crc32c(length0)), 4) +
                         le(reference_mask(reference_crc32c("")), 4);
  CHECK(read_file(path) == expected);
  CHECK(read_all(path, Compression::kNone) == std::vector<std::string>{"abc", ""});
}

TEST_CASE("TFRecord round trips, uncompressed, GZIP and ZLIB") {
  auto records = sample_records();
  for (Compression compression : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    CAPTURE(compression_name(compression));
    std::string path = scratch_file("roundtrip_" + std::string(compression_name(compression)));
    {
      TFRecordWriter writer(path, compression);
      for (const auto& r : records) writer.write(r);
    }
    std::string bytes = read_file(path);
    if (compression == Compression::kGzip) CHECK(bytes.substr(0, 2) == "\x1f\x8b");
    if (compression == Compression::kZlib) CHECK(static_cast<unsigned char>(bytes[0]) == 0x78);
    CHECK(read_all(path, compression) == records);
  }
  // Our GZIP output is what zlib's gz reader sees as the plain file, and the other way round.
  std::string plain = scratch_file("roundtrip_NONE");
  std::string gz = scratch_file("roundtrip_GZIP");
  gzFile in = gzopen(gz.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::string inflated;
  char buffer[4096];
  for (int got; (got = gzread(in, buffer, sizeof(buffer))) > 0;) inflated.append(buffer, got);
  gzclose(in);
  CHECK(inflated == read_file(plain));
  std::string foreign = scratch_file("foreign.gz");
  gzFile out = gzopen(foreign.c_str(), "wb");
  std::string original = read_file(plain);
  gzwrite(out, original.data(), static_cast<unsigned>(original.size()));
  gzclose(out);
  CHECK(read_all(foreign, Compression::kGzip) == records);
  CHECK(compression_from_name("GZIP") == Compression::kGzip);
  CHECK(compression_from_name("") == Compression::kNone);
  CHECK(contains(error_message<InvalidArgumentError>([] { compression_from_name("BZIP2"); }),
                 "BZIP2"));
}

TEST_CASE("corrupt and truncated TFRecord files are DataLossErrors naming file and record") {
  std::string good = scratch_file("good.tfrecord");
  {
    TFRecordWriter writer(good);
    for (const char* r : {"first", "second", "third"}) writer.write(r);
  }
  std::string bytes = read_file(good);
  size_t second = 12 + 5 + 4;  // offset of record 1

  std::string flipped_data = bytes;
  flipped_data[second + 12 + 2] ^= 0x01;
  std::string path = scratch_file("bad_data.tfrecord");
  write_file(path, flipped_data);
  std::string message = error_message<DataLossError>([&] { read_all(path, Compression::kNone); });
  CHECK(contains(message, path));
  CHECK(contains(message, "record 1 at byte 21"));
  CHECK(contains(message, "corrupt TFRecord data"));

  std::string flipped_length = bytes;
  flipped_length[second] ^= 0x40;
  write_file(path, flipped_length);
  CHECK(contains(error_message<DataLossError>([&] { read_all(path, Compression::kNone); }),
                 "corrupt TFRecord length"));

  write_file(path, bytes.substr(0, second + 12 + 3));
  message = error_message<DataLossError>([&] { read_all(path, Compression::kNone); });
  CHECK(contains(message, "truncated"));
  CHECK(contains(message, "record 1"));
  write_file(path, bytes.substr(0, second + 5));
  CHECK(contains(error_message<DataLossError>([&] { read_all(path, Compression::kNone); }),
                 "12-byte header"));
  write_file(path, bytes.substr(0, bytes.size() - 2));
  CHECK(contains(error_message<DataLossError>([&] { read_all(path, Compression::kNone); }),
                 "CRC is missing"));

  // Compressed: garbage, a plain file read as GZIP, and a cut-off stream.
  std::string gz = scratch_file("good.tfrecord.gz");
  {
    TFRecordWriter writer(gz, Compression::kGzip);
    for (int i = 0; i < 100; ++i) writer.write("record number " + std::to_string(i));
  }
  CHECK(contains(error_message<DataLossError>([&] { read_all(good, Compression::kGzip); }),
                 "not valid GZIP data"));
  std::string gz_bytes = read_file(gz);
  write_file(path, gz_bytes.substr(0, gz_bytes.size() / 2));
  CHECK(contains(error_message<DataLossError>([&] { read_all(path, Compression::kGzip); }),
                 "truncated"));
  std::string damaged = gz_bytes;
  damaged[gz_bytes.size() / 2] ^= 0x55;
  damaged[gz_bytes.size() / 2 + 1] ^= 0x55;
  write_file(path, damaged);
  CHECK(error_message<DataLossError>([&] { read_all(path, Compression::kGzip); }) != "<no error>");

  std::string missing = scratch_file("no_such.tfrecord");
  message = error_message<NotFoundError>([&] { read_all(missing, Compression::kNone); });
  CHECK(contains(message, missing));
}

TEST_CASE("tfrecord_dataset reads files in order and resumes at any record") {
  std::vector<std::string> paths{scratch_file("ds_a.tfrecord"), scratch_file("ds_b.tfrecord")};
  std::vector<std::string> expected;
  for (size_t f = 0; f < paths.size(); ++f) {
    TFRecordWriter writer(paths[f], Compression::kGzip);
    for (int i = 0; i < 7; ++i) {
      std::string record = "file" + std::to_string(f) + "/" + std::to_string(i);
      writer.write(record);
      expected.push_back(record);
    }
  }
  auto ds = tfrecord_dataset(paths, {.compression = Compression::kGzip});
  std::vector<std::string> got;
  for (const auto& e : est::testing::drain(ds)) got.push_back(tensor_bytes(e.value));
  CHECK(got == expected);
  est::testing::check_resume(ds, {0, 3, 7, 9});
  est::testing::check_resume(ds.batch(1).shuffle(5, 2), {0, 3, 7, 9});
  CHECK(contains(error_message<NotFoundError>(
                     [] { est::testing::drain(tfrecord_dataset({"/nonexistent/x"})); }),
                 "/nonexistent/x"));
}

TEST_CASE("interleave over TFRecord files, sequential and parallel, sharded by file") {
  std::vector<std::string> paths;
  for (int f = 0; f < 3; ++f) {
    paths.push_back(scratch_file("interleave_" + std::to_string(f) + ".tfrecord"));
    TFRecordWriter writer(paths.back());
    for (int i = 0; i < 3; ++i) writer.write(std::to_string(f) + ":" + std::to_string(i));
  }
  auto open = [](const Element& file) { return tfrecord_dataset({tensor_bytes(file.value)}); };
  auto records = [](const Dataset& ds) {
    std::vector<std::string> out;
    for (const auto& e : est::testing::drain(ds)) out.push_back(tensor_bytes(e.value));
    return out;
  };
  // cycle_length 2: files 0 and 1 alternate, then file 2 takes the first free slot.
  std::vector<std::string> expected{"0:0", "1:0", "0:1", "1:1", "0:2", "1:2", "2:0", "2:1", "2:2"};
  CHECK(records(Dataset::from_strings(paths).interleave(open, 2)) == expected);
  CHECK(records(Dataset::from_strings(paths).interleave(open, 2, 1, kAutotune)) == expected);
  // Sharding the file list gives each pipeline whole files.
  CHECK(records(Dataset::from_strings(paths).shard(2, 1).interleave(open, 2)) ==
        std::vector<std::string>{"1:0", "1:1", "1:2"});
  est::testing::check_resume(Dataset::from_strings(paths).interleave(open, 2, 1, 2), {0, 1, 4, 7});
}
