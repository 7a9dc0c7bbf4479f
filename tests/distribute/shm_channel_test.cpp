// ShmChannel: bytes arrive whole and in order through a small ring buffer whatever the sizes
// of the writes and reads (wrap-around, waits on both sides), and a wait that its check
// abandons ends with the check's exception.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <thread>

#include "distribute/net/shm_channel.h"

namespace est::distribute {

TEST_CASE("ShmChannel carries a stream through a small buffer, both sides waiting in turn") {
  auto writer = ShmChannel::create(4096 + 12);  // a capacity no chunk size divides
  REQUIRE(writer != nullptr);
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
  CHECK_THROWS_WITH(reader->read(1, [&](const char* s, size_t) { byte = *s; }, give_up),
                    "the peer is gone");
  std::vector<char> full(1024, 'x');
  writer->write(full.data(), full.size(), [] {});  // fills the buffer
  checks = 0;
  CHECK_THROWS_WITH(writer->write(full.data(), 1, give_up), "the peer is gone");
  CHECK(ShmChannel::open("/not-an-est-segment") == nullptr);
  CHECK(ShmChannel::open("bad/name") == nullptr);
}

}  // namespace est::distribute
