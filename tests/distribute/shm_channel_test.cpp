// ShmChannel: bytes arrive whole and in order through a small ring buffer whatever the sizes
// of the writes and reads (wrap-around, waits on both sides), a whole frame is read in place as
// one span even where it wraps, and a wait that its check abandons ends with the check's
// exception.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <thread>

#include "distribute/net/shm_channel.h"

namespace est::distribute {

TEST_CASE("ShmChannel carries a stream through a small buffer, both sides waiting in turn") {
  auto writer = ShmChannel::create(4096 + 12);  // a capacity no chunk size divides
  REQUIRE(writer != nullptr);
  CHECK(writer->capacity() == 8192);  // whole pages
  auto reader = ShmChannel::open(writer->name());
  REQUIRE(reader != nullptr);
  writer->unlink();
  CHECK(ShmChannel::open(writer->name()) == nullptr);  // the name is gone, the mappings stay
  std::vector<char> sent(1 << 20);
  std::mt19937 random(7);
  for (char& c : sent) c = static_cast<char>(random());
  std::thread producer([&] {
    std::mt19937 sizes(1);
    for (size_t at = 0; at < sent.size();) {
      size_t n = std::min<size_t>(1 + sizes() % 9000, sent.size() - at);
      writer->write(sent.data() + at, n, [] {});
      at += n;
    }
  });
  std::vector<char> received;
  std::mt19937 sizes(2);
  while (received.size() < sent.size()) {
    size_t n = std::min<size_t>(1 + sizes() % 7000, sent.size() - received.size());
    reader->read(
        n, [&](const char* span, size_t k) { received.insert(received.end(), span, span + k); },
        [] {});
  }
  producer.join();
  CHECK(received == sent);
}

TEST_CASE("ShmChannel waits end when the check throws (a dead peer)") {
  auto writer = ShmChannel::create(1024);
  auto reader = ShmChannel::open(writer->name());
  REQUIRE(reader != nullptr);
  int checks = 0;
  auto give_up = [&] {
    if (++checks == 3) throw std::runtime_error("the peer is gone");
  };
  char byte;
  CHECK_THROWS_WITH(reader->read(
                        1, [&](const char* s, size_t) { byte = *s; }, give_up),
                    "the peer is gone");
  checks = 0;
  CHECK_THROWS_WITH(reader->read_whole(
                        1, [&](const char*, size_t) {}, give_up),
                    "the peer is gone");
  std::vector<char> full(writer->capacity(), 'x');
  writer->write(full.data(), full.size(), [] {});  // fills the buffer
  checks = 0;
  CHECK_THROWS_WITH(writer->write(full.data(), 1, give_up), "the peer is gone");
  bool filled = false;  // without waiting: refused at once, nothing written
  CHECK_FALSE(writer->write_whole(
      1, [&](char*) { filled = true; }, give_up, /*wait=*/false));
  CHECK_FALSE(filled);
  CHECK(ShmChannel::open("/not-an-est-segment") == nullptr);
  CHECK(ShmChannel::open("bad/name") == nullptr);
}

TEST_CASE("ShmChannel: whole frames are written and read in place as one span, wrapped too") {
  auto writer = ShmChannel::create(4096);
  auto reader = ShmChannel::open(writer->name());
  REQUIRE(reader != nullptr);
  const size_t capacity = writer->capacity();
  std::mt19937 random(3);
  // Frames of 3/8 of the buffer: every third one wraps at the end; the last fills it whole.
  std::vector<size_t> sizes(40, capacity * 3 / 8);
  sizes.push_back(capacity);
  std::vector<std::vector<char>> frames;
  for (size_t n : sizes) {
    frames.emplace_back(n);
    for (char& c : frames.back()) c = static_cast<char>(random());
  }
  // Every other frame is written in place (write_whole), the others copied in (write); a fill
  // that throws writes nothing.
  std::thread producer([&] {
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto& frame = frames[i];
      if (i == 5)
        CHECK_THROWS_WITH(
            writer->write_whole(
                frame.size(), [](char*) { throw std::runtime_error("no message"); }, [] {}),
            "no message");
      if (i % 2 == 0)
        writer->write_whole(
            frame.size(), [&](char* at) { std::copy(frame.begin(), frame.end(), at); }, [] {});
      else
        writer->write(frame.data(), frame.size(), [] {});
    }
  });
  size_t whole = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i == 7) {  // a reader that fails leaves the frame for the next read
      CHECK_THROWS_WITH(
          reader->read_whole(
              frames[i].size(), [](const char*, size_t) { throw std::runtime_error("bad frame"); },
              [] {}),
          "bad frame");
    }
    reader->read_whole(
        frames[i].size(),
        [&](const char* span, size_t n) {
          whole += std::vector<char>(span, span + n) == frames[i] ? 1 : 0;
        },
        [] {});
  }
  producer.join();
  CHECK(whole == frames.size());
  CHECK_THROWS_AS(reader->read_whole(
                      capacity + 1, [](const char*, size_t) {}, [] {}),
                  std::length_error);
  CHECK_THROWS_AS(writer->write_whole(
                      capacity + 1, [](char*) {}, [] {}),
                  std::length_error);
}

}  // namespace est::distribute
