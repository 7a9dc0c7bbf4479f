// ShmChannel: the shared segment, the two counters, and futex waits in shared memory.
#include "distribute/net/shm_channel.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace est::distribute {
namespace {

constexpr uint64_t kMagic = 0x45535453484d3032ULL;  // "ESTSHM02": the buffer mapped twice
constexpr int kSpins = 256;

void futex_wait(uint32_t* word, uint32_t expected) {
  timespec timeout{.tv_sec = 0, .tv_nsec = 100'000'000};  // 100 ms, then the caller checks
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, 1, nullptr, nullptr, 0); }

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// In the shared page; the counters on their own cache lines.
struct alignas(64) ShmChannel::Header {
  uint64_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> written;
  alignas(64) std::atomic<uint64_t> consumed;
  alignas(64) uint32_t data_word;  // bumped after each write; the reader sleeps on it
  uint32_t reader_waiting;
  alignas(64) uint32_t space_word;  // bumped after each read; the writer sleeps on it
  uint32_t writer_waiting;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");

// The header's bytes before the buffer: whole pages, so that the buffer can be mapped twice.
size_t ShmChannel::header_bytes() {
  auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (sizeof(Header) + page - 1) / page * page;
}

namespace {

// Maps the segment `fd` (header_bytes() + capacity bytes) with its buffer twice in a row: the
// header and buffer, then the buffer again, so that any `capacity` bytes from any position of
// the ring are contiguous in memory (a span that wraps at the end reads on into the second
// mapping). nullptr when it cannot.
void* map_twice(int fd, size_t header, size_t capacity) {
  void* reserved = ::mmap(nullptr, header + 2 * capacity, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(reserved);
  void* first =
      ::mmap(base, header + capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  void* second = first == MAP_FAILED
                     ? MAP_FAILED
                     : ::mmap(base + header + capacity, capacity, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(header));
  if (first == MAP_FAILED || second == MAP_FAILED) {
    ::munmap(reserved, header + 2 * capacity);
    return nullptr;
  }
  return reserved;
}

}  // namespace

std::unique_ptr<ShmChannel> ShmChannel::create(size_t capacity) {
  auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  capacity = std::max(page, (capacity + page - 1) / page * page);
  std::random_device random;
  std::string name = fmt::format("/est-data-{:08x}{:08x}", random(), random());
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  if (::ftruncate(fd, static_cast<off_t>(header_bytes() + capacity)) != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  void* mapping = map_twice(fd, header_bytes(), capacity);
  ::close(fd);
  if (mapping == nullptr) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  auto* header = new (mapping) Header{};
  header->magic = kMagic;
  header->capacity = capacity;
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, mapping, capacity));
}

std::unique_ptr<ShmChannel> ShmChannel::open(const std::string& name) {
  if (name.empty() || name.find('/', 1) != std::string::npos) return nullptr;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < static_cast<off_t>(header_bytes()) + 1) {
    ::close(fd);
    return nullptr;
  }
  // The capacity is what the file holds beyond the header; the header must say the same.
  size_t capacity = static_cast<size_t>(size) - header_bytes();
  void* mapping = map_twice(fd, header_bytes(), capacity);
  ::close(fd);
  if (mapping == nullptr) return nullptr;
  auto* header = static_cast<Header*>(mapping);
  if (header->magic != kMagic || header->capacity != capacity) {
    ::munmap(mapping, header_bytes() + 2 * capacity);
    return nullptr;
  }
  auto channel = std::unique_ptr<ShmChannel>(new ShmChannel(name, mapping, capacity));
  channel->linked_ = false;  // the creator removes the name
  return channel;
}

ShmChannel::ShmChannel(std::string name, void* mapping, size_t capacity)
    : name_(std::move(name)),
      mapping_(mapping),
      mapped_bytes_(header_bytes() + 2 * capacity),
      header_(static_cast<Header*>(mapping)),
      buffer_(static_cast<char*>(mapping) + header_bytes()),
      capacity_(capacity) {}

ShmChannel::~ShmChannel() {
  unlink();
  ::munmap(mapping_, mapped_bytes_);
}

void ShmChannel::unlink() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

template <class Ready>
void ShmChannel::wait(Ready ready, uint32_t* word, uint32_t* waiting,
                      const std::function<void()>& check) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return;
    relax();
  }
  std::atomic_ref<uint32_t> flag(*waiting), value(*word);
  for (;;) {
    uint32_t seen = value.load();
    flag.store(1);
    if (ready()) break;
    futex_wait(word, seen);
    flag.store(0);
    if (ready()) return;
    check();
  }
  flag.store(0);
}

void ShmChannel::publish_written(uint64_t written) {
  header_->written.store(written);
  std::atomic_ref<uint32_t>(header_->data_word).fetch_add(1);
  if (std::atomic_ref<uint32_t>(header_->reader_waiting).load()) futex_wake(&header_->data_word);
}

void ShmChannel::publish_consumed(uint64_t consumed) {
  header_->consumed.store(consumed);
  std::atomic_ref<uint32_t>(header_->space_word).fetch_add(1);
  if (std::atomic_ref<uint32_t>(header_->writer_waiting).load()) futex_wake(&header_->space_word);
}

void ShmChannel::write(const void* data, size_t n, const std::function<void()>& check) {
  const char* in = static_cast<const char*>(data);
  while (n > 0) {
    uint64_t written = header_->written.load(std::memory_order_relaxed);
    auto room = [&] { return capacity_ - (written - header_->consumed.load()); };
    if (room() == 0)
      wait([&] { return room() > 0; }, &header_->space_word, &header_->writer_waiting, check);
    size_t offset = written % capacity_;
    size_t k = std::min(n, static_cast<size_t>(room()));  // contiguous: the buffer is mapped twice
    std::memcpy(buffer_ + offset, in, k);
    publish_written(written + k);
    in += k;
    n -= k;
  }
}

void ShmChannel::read(size_t n, const std::function<void(const char*, size_t)>& consume,
                      const std::function<void()>& check) {
  while (n > 0) {
    uint64_t consumed = header_->consumed.load(std::memory_order_relaxed);
    auto available = [&] { return header_->written.load() - consumed; };
    if (available() == 0)
      wait([&] { return available() > 0; }, &header_->data_word, &header_->reader_waiting, check);
    size_t offset = consumed % capacity_;
    size_t k = std::min(n, static_cast<size_t>(available()));
    consume(buffer_ + offset, k);
    publish_consumed(consumed + k);
    n -= k;
  }
}

bool ShmChannel::write_whole(size_t n, const std::function<void(char*)>& fill,
                             const std::function<void()>& check, bool wait) {
  if (n > capacity_)
    throw std::length_error(
        fmt::format("ShmChannel::write_whole: {} bytes in a channel of {}", n, capacity_));
  uint64_t written = header_->written.load(std::memory_order_relaxed);
  auto room = [&] { return capacity_ - (written - header_->consumed.load()); };
  if (room() < n) {
    if (!wait) return false;
    this->wait([&] { return room() >= n; }, &header_->space_word, &header_->writer_waiting, check);
  }
  fill(buffer_ + written % capacity_);
  publish_written(written + n);
  return true;
}

void ShmChannel::read_whole(size_t n, const std::function<void(const char*, size_t)>& consume,
                            const std::function<void()>& check) {
  if (n > capacity_)
    throw std::length_error(
        fmt::format("ShmChannel::read_whole: {} bytes in a channel of {}", n, capacity_));
  uint64_t consumed = header_->consumed.load(std::memory_order_relaxed);
  auto available = [&] { return header_->written.load() - consumed; };
  if (available() < n)
    wait([&] { return available() >= n; }, &header_->data_word, &header_->reader_waiting, check);
  consume(buffer_ + consumed % capacity_, n);
  publish_consumed(consumed + n);
}

}  // namespace est::distribute
