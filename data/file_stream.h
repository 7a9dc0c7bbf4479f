// Buffered sequential file access with optional GZIP/ZLIB (de)compression (ISA-L igzip to
// read, zlib to write).
//
// Every reader in data/ (TFRecord, CSV, IDX, the file cache) reads through InputStream, so they
// share one place that turns system and zlib failures into est::Error messages naming the file:
// a missing file is NotFoundError with the path; corrupt or truncated compressed data is
// DataLossError with the offset. Offsets count uncompressed bytes, which is what iterator state
// stores; seeking in a compressed file re-reads it from the start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ops/error.h"

namespace est::data {

enum class Compression { kNone, kGzip, kZlib };

// TensorFlow's spellings: "" or "NONE", "GZIP", "ZLIB". InvalidArgumentError otherwise.
Compression compression_from_name(std::string_view name);
std::string_view compression_name(Compression compression);

class InputStream {
 public:
  InputStream(std::string path, Compression compression = Compression::kNone,
              size_t buffer_size = size_t{1} << 18);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Copies up to `size` bytes into `out`; fewer only at the end of the data.
  size_t read(void* out, size_t size);
  // The bytes buffered ahead of the current position (refilled when empty; empty at the end).
  // consume(n) advances past n of them. Lets parsers scan without a copy per byte.
  std::string_view peek();
  void consume(size_t count);

  uint64_t offset() const { return buffer_offset_ + begin_; }  // uncompressed bytes consumed
  void seek(uint64_t offset);
  const std::string& path() const { return path_; }
  Compression compression() const { return compression_; }

  // The most uncompressed bytes the file can still yield after offset(): exact for an
  // uncompressed file, and for a compressed one its compressed size times deflate's largest
  // expansion (1032:1). What a size read from the file is checked against before allocating.
  uint64_t max_remaining() const;

 private:
  bool refill();  // false at the end of the data
  // The next bytes of the data (decompressed, or the file's own) into out[0, size); fewer only
  // at the end of the data.
  size_t produce(char* out, size_t size);
  // Decompresses into out[0, size); fewer bytes only at the end of the data.
  size_t inflate_into(char* out, size_t size);
  size_t read_raw(char* out, size_t size);
  void rewind();

  std::string path_;
  Compression compression_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;   // on disk, when opened
  std::vector<char> buffer_;  // data, decompressed
  size_t begin_ = 0, end_ = 0;
  uint64_t buffer_offset_ = 0;  // offset of buffer_[0]
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

class OutputStream {
 public:
  // Creates or truncates `path`.
  OutputStream(std::string path, Compression compression = Compression::kNone,
               size_t buffer_size = size_t{1} << 18);
  ~OutputStream();  // closes; errors at this point are lost, so call close() to see them
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view data) { write(data.data(), data.size()); }
  void flush();  // hands buffered data to the OS (compressed streams: a zlib sync flush)
  void close();  // finishes the compressed stream and closes the file
  const std::string& path() const { return path_; }

 private:
  void write_raw(const char* data, size_t size);
  void deflate_buffer(int flush_mode);

  std::string path_;
  Compression compression_;
  int fd_ = -1;
  std::vector<char> buffer_;
  size_t used_ = 0;
  struct Deflater;
  std::unique_ptr<Deflater> deflater_;
};

// Throws NotFoundError / PermissionDeniedError / UnknownError for a failed system call on `path`.
[[noreturn]] void throw_file_error(const std::string& path, std::string_view action, int error);

// Runs `allocate`, which makes a buffer of a size read from a file, and turns its failure
// (std::bad_alloc, std::length_error, ResourceExhaustedError) into a DataLossError: `what`
// (a string, or a function returning one, called only on failure) names the file and the field
// that declared the size. A size no memory can hold is the file's fault, and every reader
// reports it the same way.
template <class What, class Fn>
auto allocate_declared(uint64_t bytes, const What& what, Fn&& allocate) {
  std::string failure;
  try {
    return allocate();
  } catch (const std::bad_alloc&) {
    failure = "out of memory";
  } catch (const std::length_error& error) {
    failure = error.what();
  } catch (const ResourceExhaustedError& error) {
    failure = error.what();
  }
  std::string named;
  if constexpr (std::is_invocable_v<const What&>)
    named = what();
  else
    named = what;
  throw DataLossError(named + " declares " + std::to_string(bytes) +
                      " bytes, which cannot be allocated (" + failure + "); the file is damaged");
}

}  // namespace est::data
