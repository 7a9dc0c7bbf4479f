// TensorBoard event files: round trip through our reader, the file name, the file_version
// record, one record's bytes worked out by hand (protobuf wire format + TFRecord framing with a
// bitwise CRC32C written here), thread safety, flush policy, and corruption -> DataLossError.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "estimator/event_reader.h"
#include "estimator/summary_writer.h"
#include "ops/error.h"

namespace fs = std::filesystem;
using doctest::Approx;

namespace {

// A fresh directory under the system temp dir, removed when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    static int counter = 0;
    path = fs::temp_directory_path() / ("est_summary_test_" + std::to_string(::getpid()) + "_" +
                                        name + "_" + std::to_string(counter++));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string str() const { return path.string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// CRC32C bit by bit (reflected polynomial 0x82F63B78) and TFRecord's mask.
uint32_t reference_masked_crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  crc = ~crc;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string little_endian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

// length | masked crc(length) | data | masked crc(data)
std::string tfrecord_frame(const std::string& data) {
  std::string length = little_endian(data.size(), 8);
  return length + little_endian(reference_masked_crc32c(length), 4) + data +
         little_endian(reference_masked_crc32c(data), 4);
}

std::string double_bytes(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return little_endian(bits, 8);
}

// The parts one after another (std::string_view keeps embedded zero bytes when built with a
// length).
std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part.data(), part.size());
  return out;
}

// The file_version Event: wall_time (field 1, fixed64), file_version (field 3, length-delimited,
// 13 bytes). step 0 is proto3's default, so it is not written at all.
std::string file_version_event(double wall_time) {
  return concat({"\x09", double_bytes(wall_time), "\x1a\x0d", "brain.Event:2"});
}

std::string only_file(const std::string& dir) {
  std::vector<std::string> files = est::event_files(dir);
  REQUIRE(files.size() == 1);
  return files[0];
}

}  // namespace

TEST_CASE("scalars round-trip through the event file") {
  TempDir dir("round_trip");
  {
    est::SummaryWriter writer(dir.str());
    writer.add_scalar("loss", 2.33, 100);
    writer.add_scalar("global_step/sec", 201.5, 100);
    writer.add_scalar("loss", -0.125, 200);
    writer.add_scalar("accuracy", 1.0 / 3.0, 200);
  }  // the destructor flushes
  std::vector<est::ScalarEvent> events = est::read_events(only_file(dir.str()));
  REQUIRE(events.size() == 4);
  CHECK(events[0].tag == "loss");
  CHECK(events[0].step == 100);
  CHECK(events[0].value == Approx(2.33).epsilon(1e-7));  // stored as float32
  CHECK(events[1].tag == "global_step/sec");
  CHECK(events[1].value == 201.5);
  CHECK(events[2].step == 200);
  CHECK(events[2].value == -0.125);
  CHECK(events[3].value == static_cast<float>(1.0 / 3.0));
  double now = static_cast<double>(std::time(nullptr));
  for (const auto& event : events) CHECK(std::abs(event.wall_time - now) < 60);
}

TEST_CASE("file name, first record, and what flush() makes visible") {
  TempDir dir("name");
  double fake_now = 1700000000.25;
  est::SummaryWriterOptions options;
  options.clock = [&] { return fake_now; };
  est::SummaryWriter writer((dir.path / "nested" / "eval").string(), options);  // creates parents

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string expected_name = std::string("events.out.tfevents.1700000000.") + host;
  CHECK(fs::path(writer.path()).filename().string() == expected_name);
  CHECK(fs::path(writer.path()).parent_path() == dir.path / "nested" / "eval");
  CHECK(std::regex_match(fs::path(writer.path()).filename().string(),
                         std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")));

  // The file_version record is on disk as soon as the writer exists.
  CHECK(read_bytes(writer.path()) == tfrecord_frame(file_version_event(fake_now)));
  CHECK(est::read_file_version(writer.path()) == "brain.Event:2");
  CHECK(est::read_events(writer.path()).empty());

  // Events are buffered (max_queue 10, flush_secs 120) until flush().
  writer.add_scalar("loss", 1.0, 1);
  CHECK(est::read_events(writer.path()).empty());
  writer.flush();
  CHECK(est::read_events(writer.path()).size() == 1);
  // ... or until flush_secs have passed on the writer's clock.
  writer.add_scalar("loss", 2.0, 2);
  CHECK(est::read_events(writer.path()).size() == 1);
  fake_now += 121;
  writer.add_scalar("loss", 3.0, 3);
  CHECK(est::read_events(writer.path()).size() == 3);

  // A second writer in the same second does not overwrite the first file.
  est::SummaryWriter second((dir.path / "nested" / "eval").string(), options);
  CHECK(second.path() != writer.path());
  CHECK(est::event_files((dir.path / "nested" / "eval").string()).size() == 2);
  CHECK(est::read_events(writer.path()).size() == 3);
}

TEST_CASE("one scalar record, byte by byte") {
  TempDir dir("bytes");
  est::SummaryWriterOptions options;
  options.clock = [] { return 1600000000.5; };
  std::string path;
  {
    est::SummaryWriter writer(dir.str(), options);
    path = writer.path();
    writer.add_scalar("loss", 2.5, 5);
  }
  // Summary.Value: tag (field 1, wire type 2) "loss"; simple_value (field 2, wire type 5) 2.5f
  // = 0x40200000 little-endian.
  std::string value = concat(
      {std::string_view("\x0a\x04", 2), "loss", std::string_view("\x15\x00\x00\x20\x40", 5)});
  REQUIRE(value.size() == 11);
  std::string summary = concat({"\x0a\x0b", value});  // Summary.value (field 1), 11 bytes
  // Event: wall_time (field 1, fixed64), step (field 2, varint 5), summary (field 5, wire type
  // 2: tag byte 0x2a) of 13 bytes.
  std::string event = concat({"\x09", double_bytes(1600000000.5), "\x10\x05", "\x2a\x0d", summary});
  REQUIRE(event.size() == 26);
  std::string header = tfrecord_frame(file_version_event(1600000000.5));
  CHECK(header.size() == 12 + 24 + 4);
  CHECK(read_bytes(path) == header + tfrecord_frame(event));
  // 12 bytes of header, 26 of data, 4 of footer.
  CHECK(read_bytes(path).size() == header.size() + 12 + 26 + 4);
}

TEST_CASE("writers are thread-safe") {
  TempDir dir("threads");
  constexpr int kThreads = 4;
  constexpr int kEach = 250;
  {
    est::SummaryWriter writer(dir.str());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) writer.add_scalar("thread" + std::to_string(t), i, i);
      });
    for (auto& thread : threads) thread.join();
  }
  std::vector<est::ScalarEvent> events = est::read_events(only_file(dir.str()));
  REQUIRE(events.size() == kThreads * kEach);
  std::vector<int> next(kThreads, 0);
  for (const auto& event : events) {
    int t = std::stoi(event.tag.substr(6));
    CHECK(event.step == next[t]);  // each thread's events in its order, none lost
    CHECK(event.value == next[t]);
    ++next[t];
  }
}

TEST_CASE("corrupt and truncated event files are a DataLossError") {
  TempDir dir("corrupt");
  std::string path;
  {
    est::SummaryWriter writer(dir.str());
    path = writer.path();
    writer.add_scalar("loss", 1.5, 1);
    writer.add_scalar("loss", 0.5, 2);
  }
  std::string good = read_bytes(path);
  REQUIRE(est::read_events(path).size() == 2);

  // A flipped bit in the last record's payload: the data CRC no longer matches.
  std::string flipped = good;
  flipped[flipped.size() - 8] ^= 0x01;
  write_bytes(path, flipped);
  CHECK_THROWS_AS(est::read_events(path), est::DataLossError);

  // A flipped bit in a length field: the length CRC catches it.
  std::string bad_length = good;
  size_t first_record = 12 + 9 + 2 + 13 + 4;  // the file_version record's size
  bad_length[first_record] ^= 0x04;
  write_bytes(path, bad_length);
  CHECK_THROWS_AS(est::read_events(path), est::DataLossError);

  // Cut in the middle of the last record.
  write_bytes(path, good.substr(0, good.size() - 5));
  try {
    est::read_events(path);
    FAIL("expected a DataLossError");
  } catch (const est::DataLossError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);  // names the file
  }

  // Valid framing around bytes that are not an Event proto.
  write_bytes(path, tfrecord_frame(std::string("\xff\xff\xff", 3)));
  CHECK_THROWS_AS(est::read_events(path), est::DataLossError);
  // An empty file has no file_version record.
  write_bytes(path, "");
  CHECK(est::read_events(path).empty());
  CHECK_THROWS_AS(est::read_file_version(path), est::DataLossError);
  CHECK_THROWS_AS(est::read_events((dir.path / "missing").string()), est::NotFoundError);
}

TEST_CASE("bad log directories and writes after close are clear errors") {
  CHECK_THROWS_AS(est::SummaryWriter(""), est::InvalidArgumentError);
  TempDir dir("errors");
  fs::create_directories(dir.path);
  write_bytes((dir.path / "file").string(), "x");  // a file where a directory is needed
  try {
    est::SummaryWriter writer((dir.path / "file" / "eval").string());
    FAIL("expected an error");
  } catch (const est::FailedPreconditionError& e) {
    CHECK(std::string(e.what()).find((dir.path / "file" / "eval").string()) != std::string::npos);
  }
  est::SummaryWriter writer(dir.str());
  writer.close();
  CHECK_THROWS_AS(writer.add_scalar("loss", 1, 1), est::FailedPreconditionError);
  writer.flush();  // harmless after close
  CHECK(est::event_files((dir.path / "absent").string()).empty());
}
