// PagePopulator: madvise(MADV_POPULATE_WRITE) a step at a time, ahead of a sequential writer.
#include "data/page_populator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace est::data {
namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

// Makes the pages overlapping [begin, end) present and writable; false when the kernel cannot.
// Pages are only faulted in, never written, so a page the writer (or another buffer sharing
// it) is using keeps its bytes.
bool populate(const char* begin, const char* end) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
  uintptr_t last = (reinterpret_cast<uintptr_t>(end) + page - 1) & ~(page - 1);
  if (last <= first) return true;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE) == 0)
    return true;
  // EINVAL: no such advice here; anything else (EINTR, ENOMEM under pressure, EFAULT) only
  // leaves the pages to the writer.
  return errno != EINVAL;
}

}  // namespace

PagePopulator::~PagePopulator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PagePopulator::wrote(char* data, size_t bytes, size_t written) {
  if (data == told_region_ && written < next_tell_) return;
  told_region_ = data;
  next_tell_ = written + kStepBytes;
  {
    std::lock_guard lock(mutex_);
    if (unsupported_) {
      next_tell_ = SIZE_MAX;  // never again for this buffer
      return;
    }
    if (data != region_) {
      region_ = data;
      region_bytes_ = bytes;
      populated_ = 0;
    }
    written_ = written;
    if (!thread_.joinable()) {
      // The thread waits for the lock, then for work: started under it, it sees this call's.
      if (written >= kStartBytes) thread_ = std::thread([this] { run(); });
      return;
    }
  }
  changed_.notify_all();
}

size_t PagePopulator::populated_bytes() const {
  std::lock_guard lock(mutex_);
  return populated_total_;
}

bool PagePopulator::running() const {
  std::lock_guard lock(mutex_);
  return thread_.joinable() && !unsupported_;
}

void PagePopulator::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] {
      return stopping_ ||
             (region_ != nullptr && populated_ < std::min(region_bytes_, written_ + kLeadBytes));
    });
    if (stopping_) return;
    // From the writer's position on (what it passed it has faulted itself), one step.
    char* region = region_;
    const size_t begin = std::max(populated_, written_);
    const size_t end = std::min({region_bytes_, written_ + kLeadBytes, begin + kStepBytes});
    if (begin >= end) {  // the writer is at the end of the buffer: nothing ahead of it
      populated_ = region_bytes_;
      continue;
    }
    populated_ = end;
    lock.unlock();
    const bool supported = populate(region + begin, region + end);
    lock.lock();
    populated_total_ += end - begin;
    if (!supported) {
      unsupported_ = true;
      return;
    }
  }
}

}  // namespace est::data
