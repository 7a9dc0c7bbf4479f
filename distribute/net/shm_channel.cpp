// ShmChannel: the shared segment, the two counters, and futex waits in shared memory.
#include "distribute/net/shm_channel.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

namespace est::distribute {
namespace {

constexpr uint64_t kMagic = 0x45535453484d3031ULL;  // "ESTSHM01"
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
  alignas(64) uint32_t data_word;   // bumped after each write; the reader sleeps on it
  uint32_t reader_waiting;
  alignas(64) uint32_t space_word;  // bumped after each read; the writer sleeps on it
  uint32_t writer_waiting;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");

std::unique_ptr<ShmChannel> ShmChannel::create(size_t capacity) {
  std::random_device random;
  std::string name = fmt::format("/est-data-{:08x}{:08x}", random(), random());
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  size_t bytes = sizeof(Header) + capacity;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  void* mapping = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  auto* header = new (mapping) Header{};
  header->magic = kMagic;
  header->capacity = capacity;
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, mapping, bytes));
}

std::unique_ptr<ShmChannel> ShmChannel::open(const std::string& name) {
  if (name.empty() || name.find('/', 1) != std::string::npos) return nullptr;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < static_cast<off_t>(sizeof(Header))) {
    ::close(fd);
    return nullptr;
  }
  auto bytes = static_cast<size_t>(size);
  void* mapping = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) return nullptr;
  auto* header = static_cast<Header*>(mapping);
  if (header->magic != kMagic || header->capacity + sizeof(Header) != bytes) {
    ::munmap(mapping, bytes);
    return nullptr;
  }
  auto channel = std::unique_ptr<ShmChannel>(new ShmChannel(name, mapping, bytes));
  channel->linked_ = false;  // the creator removes the name
  return channel;
}

ShmChannel::ShmChannel(std::string name, void* mapping, size_t mapped_bytes)
    : name_(std::move(name)),
      mapping_(mapping),
      mapped_bytes_(mapped_bytes),
      header_(static_cast<Header*>(mapping)),
      buffer_(static_cast<char*>(mapping) + sizeof(Header)),
      capacity_(header_->capacity) {}

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

void ShmChannel::write(const void* data, size_t n, const std::function<void()>& check) {
  const char* in = static_cast<const char*>(data);
  std::atomic_ref<uint32_t> data_word(header_->data_word), reader_waiting(header_->reader_waiting);
  while (n > 0) {
    uint64_t written = header_->written.load(std::memory_order_relaxed);
    auto room = [&] { return capacity_ - (written - header_->consumed.load()); };
    if (room() == 0)
      wait([&] { return room() > 0; }, &header_->space_word, &header_->writer_waiting, check);
    size_t offset = written % capacity_;
    size_t k = std::min({n, static_cast<size_t>(room()), capacity_ - offset});
    std::memcpy(buffer_ + offset, in, k);
    header_->written.store(written + k);
    data_word.fetch_add(1);
    if (reader_waiting.load()) futex_wake(&header_->data_word);
    in += k;
    n -= k;
  }
}

void ShmChannel::read(size_t n, const std::function<void(const char*, size_t)>& consume,
                      const std::function<void()>& check) {
  std::atomic_ref<uint32_t> space_word(header_->space_word),
      writer_waiting(header_->writer_waiting);
  while (n > 0) {
    uint64_t consumed = header_->consumed.load(std::memory_order_relaxed);
    auto available = [&] { return header_->written.load() - consumed; };
    if (available() == 0)
      wait([&] { return available() > 0; }, &header_->data_word, &header_->reader_waiting, check);
    size_t offset = consumed % capacity_;
    size_t k = std::min({n, static_cast<size_t>(available()), capacity_ - offset});
    consume(buffer_ + offset, k);
    header_->consumed.store(consumed + k);
    space_word.fetch_add(1);
    if (writer_waiting.load()) futex_wake(&header_->space_word);
    n -= k;
  }
}

}  // namespace est::distribute
