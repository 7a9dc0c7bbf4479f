// PagePopulator: faults in the pages of a buffer that is being written front to back, on a
// thread of its own, a bounded distance ahead of the writer (issue 32, item 5).
//
// A first touch of fresh memory costs about 1.7-2.5 us per 4 KB page on the KVM guests this
// project is measured on, so a memory cache() filling before a first training step (31 MB of
// chunks for Fashion-MNIST's shuffle(10000) buffer) spent more of its time in page faults than
// copying rows, on the one thread that the first batch waits for. madvise(MADV_POPULATE_WRITE)
// makes pages present and writable without changing a byte, so it can run beside the writer on
// the same pages: whichever comes first faults a page, and the writer mostly finds them present.
// Huge pages were measured instead and are bimodal on these guests (bench/README.md).
//
// The thread starts only once the writer has written kStartBytes of one buffer (small datasets
// never start it) and stays at most kLeadBytes ahead, so at most that much is made resident
// before it is written. Where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) the thread
// stops at its first attempt and the writer faults its pages as before.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace est::data {

class PagePopulator {
 public:
  static constexpr size_t kStartBytes = size_t{2} << 20;
  static constexpr size_t kLeadBytes = size_t{2} << 20;
  static constexpr size_t kStepBytes = size_t{256} << 10;

  PagePopulator() = default;
  ~PagePopulator();  // stops the thread (a step in progress ends first) and joins it
  PagePopulator(const PagePopulator&) = delete;
  PagePopulator& operator=(const PagePopulator&) = delete;

  // The writer has written the first `written` bytes of [data, data + bytes) (a new buffer
  // once `data` changes). Cheap: it takes the lock once per kStepBytes written.
  void wrote(char* data, size_t bytes, size_t written);

  // Bytes made present ahead of the writer so far, over every buffer (for tests and benches).
  size_t populated_bytes() const;
  bool running() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  char* region_ = nullptr;  // the buffer being written
  size_t region_bytes_ = 0;
  size_t written_ = 0;    // as last told
  size_t populated_ = 0;  // of region_: every page before it is present (or was skipped)
  size_t populated_total_ = 0;
  bool stopping_ = false;
  bool unsupported_ = false;  // the kernel refused: nothing more to do
  std::thread thread_;        // started at kStartBytes into a buffer
  // The writer's side, read and written by the writer alone: when to take the lock next.
  char* told_region_ = nullptr;
  size_t next_tell_ = 0;
};

}  // namespace est::data
