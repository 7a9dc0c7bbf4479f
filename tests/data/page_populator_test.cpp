// PagePopulator (data/page_populator.h): pages ahead of a sequential writer become resident
// (mincore says so) without a byte changing, no further than the lead, and never for a writer
// that stays under the start threshold; a memory cache that uses it reads back its rows.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "data/page_populator.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;

namespace {

// Fresh anonymous memory (no page resident until touched), unmapped at the end.
struct Fresh {
  explicit Fresh(size_t size) : bytes(size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    data = static_cast<char*>(p);
  }
  ~Fresh() { ::munmap(data, bytes); }
  char* data;
  size_t bytes;
};

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

// Whether each page of [begin, end) of `fresh` is resident.
std::vector<bool> resident(const Fresh& fresh, size_t begin, size_t end) {
  const size_t page = page_size();
  std::vector<unsigned char> flags(fresh.bytes / page);
  REQUIRE(::mincore(fresh.data, fresh.bytes, flags.data()) == 0);
  std::vector<bool> out;
  for (size_t p = begin / page; p < end / page; ++p) out.push_back(flags[p] & 1);
  return out;
}

bool all_of(const std::vector<bool>& flags, bool value) {
  for (bool f : flags)
    if (f != value) return false;
  return true;
}

// Whether this kernel has MADV_POPULATE_WRITE (Linux 5.14).
bool kernel_populates() {
  Fresh probe(page_size());
  return ::madvise(probe.data, page_size(), 23 /* MADV_POPULATE_WRITE */) == 0;
}

// Waits (bounded) until the populator has made `bytes` resident.
void wait_populated(const PagePopulator& populator, size_t bytes) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (populator.populated_bytes() < bytes && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(populator.populated_bytes() >= bytes);
}

}  // namespace

TEST_CASE("PagePopulator: the lead ahead of the writer becomes resident, bytes unchanged") {
  if (!kernel_populates()) {
    MESSAGE("skipped: this kernel has no MADV_POPULATE_WRITE");
    return;
  }
  constexpr size_t kBytes = size_t{16} << 20;
  Fresh buffer(kBytes);
  const size_t written = PagePopulator::kStartBytes;
  std::memset(buffer.data, 0x5A, written);
  PagePopulator populator;
  populator.wrote(buffer.data, kBytes, written);
  wait_populated(populator, PagePopulator::kLeadBytes);
  // Resident from the writer's position to the lead; nothing past it (a 2 MB margin, for
  // kernels that fault a whole huge page).
  const size_t mb = size_t{1} << 20;
  const size_t lead_end = written + PagePopulator::kLeadBytes;
  CHECK(all_of(resident(buffer, written, lead_end), true));
  CHECK(all_of(resident(buffer, lead_end + 2 * mb, kBytes), false));
  // The written bytes kept, the populated ones still zero.
  CHECK(buffer.data[0] == 0x5A);
  CHECK(buffer.data[written - 1] == 0x5A);
  for (size_t at = written; at < lead_end; at += page_size()) REQUIRE(buffer.data[at] == 0);

  // The writer jumps to 10 MB: the populator follows from there; what the writer passed is
  // left to it.
  populator.wrote(buffer.data, kBytes, 10 * mb);
  wait_populated(populator, 2 * PagePopulator::kLeadBytes);
  CHECK(all_of(resident(buffer, 10 * mb, 10 * mb + PagePopulator::kLeadBytes), true));
  CHECK(all_of(resident(buffer, lead_end + 2 * mb, 8 * mb), false));

  // A new buffer: populated from the writer's position there.
  Fresh next(kBytes);
  populator.wrote(next.data, kBytes, mb);
  wait_populated(populator, 3 * PagePopulator::kLeadBytes);
  CHECK(all_of(resident(next, mb, mb + PagePopulator::kLeadBytes), true));
  CHECK(all_of(resident(next, mb + PagePopulator::kLeadBytes + 2 * mb, kBytes), false));
}

TEST_CASE("PagePopulator: a writer under the start threshold starts nothing") {
  Fresh buffer(size_t{8} << 20);
  {
    PagePopulator populator;
    for (size_t written = 4096; written < PagePopulator::kStartBytes; written += 4096) {
      std::memset(buffer.data + written - 4096, 1, 4096);
      populator.wrote(buffer.data, buffer.bytes, written);
    }
    CHECK_FALSE(populator.running());
    CHECK(populator.populated_bytes() == 0);
  }
  CHECK(all_of(resident(buffer, PagePopulator::kStartBytes + (size_t{2} << 20), buffer.bytes),
               false));
  // Destroyed right after it starts: joins without waiting for the buffer.
  PagePopulator started;
  started.wrote(buffer.data, buffer.bytes, PagePopulator::kStartBytes);
}

TEST_CASE("a memory cache of rows over several chunks reads back the same rows") {
  // 16 MB of float rows: two of the recording's 8 MB chunks and a third part-filled, written
  // with the populator running ahead.
  constexpr int64_t kRows = 1100, kWidth = 4000;
  Tensor values = Tensor::empty({kRows, kWidth});
  float* v = values.data<float>();
  for (int64_t i = 0; i < kRows * kWidth; ++i) v[i] = static_cast<float>(i % 9973) * 0.5f;
  Tensor labels = Tensor::empty({kRows}, DType::kI64);
  for (int64_t i = 0; i < kRows; ++i) labels.data<int64_t>()[i] = i;
  data::Dataset cached = data::Dataset::from_tensor_slices(Features{{"x", values}}, labels).cache();
  for (int epoch = 0; epoch < 2; ++epoch) {
    CAPTURE(epoch);
    std::vector<data::Element> rows = est::testing::drain(cached);
    REQUIRE(rows.size() == static_cast<size_t>(kRows));
    for (int64_t r = 0; r < kRows; r += 97) {
      CHECK(rows[r].labels.item() == r);
      CHECK(std::memcmp(rows[r].features.at("x").raw_data(), v + r * kWidth,
                        kWidth * sizeof(float)) == 0);
    }
    CHECK(std::memcmp(rows.back().features.at("x").raw_data(), v + (kRows - 1) * kWidth,
                      kWidth * sizeof(float)) == 0);
  }
}
