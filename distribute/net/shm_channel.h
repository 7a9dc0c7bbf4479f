// ShmChannel: a one-way byte stream between two processes of one host through a shared-memory
// ring buffer, the data plane's fast path between ring neighbours on the same machine (as
// NCCL's and Gloo's shared-memory transports): the writer copies into the shared buffer and the
// reader adds straight out of it, with no system call per chunk and no kernel copies, where
// loopback TCP costs two copies and the TCP stack each way.
//
// The writer creates the segment (a random name under /dev/shm, mode 0600), tells the reader
// its name over their TCP connection, and removes the name once the reader has mapped it.
// The buffer is mapped twice in a row, so that a span that wraps at its end is still one span
// (read_whole hands a whole frame to its reader in place).
// Positions are two 64-bit counters (bytes written, bytes read); a side that must wait spins
// briefly, then sleeps on a futex in the shared page for at most 100 ms at a time and calls its
// `check` between sleeps (the job's health, and whether the peer's TCP connection still stands),
// so a dead or stopped peer ends the wait as it does on TCP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace est::distribute {

class ShmChannel {
 public:
  // The writer's side: a fresh mapped segment with `capacity` bytes of buffer (rounded up to
  // whole pages); null when shared memory is not available here.
  static std::unique_ptr<ShmChannel> create(size_t capacity);
  // The reader's side of a segment another process created; null when it cannot be opened
  // (not the same machine, or another /dev/shm).
  static std::unique_ptr<ShmChannel> open(const std::string& name);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  const std::string& name() const { return name_; }
  // Removes the name (both mappings stay valid).
  void unlink();

  // Writes `n` bytes, waiting for room as needed; `check` is called between waits and throws
  // to abandon the write.
  void write(const void* data, size_t n, const std::function<void()>& check);
  // Consumes `n` bytes, handing them to `consume` as contiguous spans in order (the span is
  // valid only during the call).
  void read(size_t n, const std::function<void(const char*, size_t)>& consume,
            const std::function<void()>& check);
  // Waits until the next `n` bytes (at most capacity()) have all been written, then hands them
  // to `consume` as one span, in place (no copy), and consumes them when it returns; a
  // `consume` that throws leaves them unread.
  void read_whole(size_t n, const std::function<void(const char*, size_t)>& consume,
                  const std::function<void()>& check);
  // Waits until `n` bytes (at most capacity()) are free, hands them to `fill` as one span to
  // write in place, and makes them readable when it returns (true); a `fill` that throws writes
  // nothing. With `wait` false it returns false at once, writing nothing, when they are not
  // free now.
  bool write_whole(size_t n, const std::function<void(char*)>& fill,
                   const std::function<void()>& check, bool wait = true);
  size_t capacity() const { return capacity_; }

 private:
  struct Header;
  // The mapping: the header (whole pages), the buffer, and the buffer again, so that any
  // capacity bytes of the ring from any position are one contiguous span.
  static size_t header_bytes();
  ShmChannel(std::string name, void* mapping, size_t capacity);
  // Makes the bytes written up to `written` readable (or those read up to `consumed` free) and
  // wakes the other side if it sleeps.
  void publish_written(uint64_t written);
  void publish_consumed(uint64_t consumed);
  // Waits until `ready()` holds, sleeping on `word` (its value read before the last check).
  template <class Ready>
  void wait(Ready ready, uint32_t* word, uint32_t* waiting, const std::function<void()>& check);

  std::string name_;
  void* mapping_;
  size_t mapped_bytes_;
  Header* header_;
  char* buffer_;
  size_t capacity_;
  bool linked_ = true;
};

}  // namespace est::distribute
