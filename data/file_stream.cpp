// InputStream / OutputStream: POSIX file descriptors and a buffer. Reading decompresses with
// Intel ISA-L's igzip (several times faster than zlib's inflate, which matters for the first
// epoch of a gzipped dataset); writing compresses with zlib's deflate, window bits chosen for
// GZIP (15 + 16) or ZLIB (15) framing. Both check the format's CRC / Adler checksums.
#include "data/file_stream.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ops/error.h"

namespace est::data {

namespace {
constexpr size_t kRawChunk = size_t{1} << 16;

int window_bits(Compression compression) {
  return compression == Compression::kGzip ? 15 + 16 : 15;
}
}  // namespace

void throw_file_error(const std::string& path, std::string_view action, int error) {
  std::string message =
      "cannot " + std::string(action) + " '" + path + "': " + std::strerror(error);
  if (error == ENOENT) throw NotFoundError(message + "; check the path");
  if (error == EACCES || error == EPERM) throw PermissionDeniedError(message);
  if (error == EISDIR) throw InvalidArgumentError(message + "; expected a file");
  throw UnknownError(message);
}

Compression compression_from_name(std::string_view name) {
  if (name.empty() || name == "NONE") return Compression::kNone;
  if (name == "GZIP") return Compression::kGzip;
  if (name == "ZLIB") return Compression::kZlib;
  throw InvalidArgumentError("unknown compression type '" + std::string(name) +
                             "'; use \"\", \"GZIP\" or \"ZLIB\"");
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "NONE";
    case Compression::kGzip:
      return "GZIP";
    case Compression::kZlib:
      return "ZLIB";
  }
  return "NONE";
}

// --- InputStream ---

namespace {

std::string_view inflate_error(int status) {
  switch (status) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "invalid header";
    case ISAL_UNSUPPORTED_METHOD:
      return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "checksum mismatch";
    default:
      return "decompression error";
  }
}

}  // namespace

struct InputStream::Inflater {
  inflate_state state{};
  uint32_t wrapper = ISAL_GZIP;
  std::vector<char> raw = std::vector<char>(kRawChunk);
  bool raw_eof = false;    // the file has no more compressed bytes
  bool in_member = false;  // inside a gzip member / zlib stream
  uint64_t raw_consumed = 0;

  void reset_keeping_input() {
    uint8_t* next_in = state.next_in;
    uint32_t avail_in = state.avail_in;
    isal_inflate_reset(&state);
    state.crc_flag = wrapper;
    state.next_in = next_in;
    state.avail_in = avail_in;
  }
};

InputStream::InputStream(std::string path, Compression compression, size_t buffer_size)
    : path_(std::move(path)),
      compression_(compression),
      buffer_(std::max<size_t>(buffer_size, 4096)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_file_error(path_, "open", errno);
  struct stat status {};
  if (::fstat(fd_, &status) != 0) {
    int error = errno;
    ::close(fd_);
    throw_file_error(path_, "stat", error);
  }
  file_bytes_ = static_cast<uint64_t>(status.st_size);
  if (compression_ != Compression::kNone) {
    inflater_ = std::make_unique<Inflater>();
    isal_inflate_init(&inflater_->state);
    inflater_->wrapper = compression_ == Compression::kGzip ? ISAL_GZIP : ISAL_ZLIB;
    inflater_->state.crc_flag = inflater_->wrapper;
  }
}

InputStream::~InputStream() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputStream::read_raw(char* out, size_t size) {
  size_t total = 0;
  while (total < size) {
    ssize_t got = ::read(fd_, out + total, size - total);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_file_error(path_, "read", errno);
    }
    if (got == 0) break;
    total += static_cast<size_t>(got);
  }
  return total;
}

bool InputStream::refill() {
  buffer_offset_ += end_;
  begin_ = end_ = 0;
  end_ = produce(buffer_.data(), buffer_.size());
  return end_ > 0;
}

size_t InputStream::produce(char* out, size_t size) {
  return inflater_ ? inflate_into(out, size) : read_raw(out, size);
}

size_t InputStream::inflate_into(char* out, size_t size) {
  Inflater& z = *inflater_;
  inflate_state& s = z.state;
  size_t written = 0;
  while (written < size) {
    // avail_out is 32 bits: a larger request is filled in slices.
    const size_t slice = std::min<size_t>(size - written, size_t{1} << 30);
    s.next_out = reinterpret_cast<uint8_t*>(out + written);
    s.avail_out = static_cast<uint32_t>(slice);
    while (s.avail_out > 0) {
      if (s.avail_in == 0 && !z.raw_eof) {
        size_t got = read_raw(z.raw.data(), z.raw.size());
        if (got == 0) z.raw_eof = true;
        s.next_in = reinterpret_cast<uint8_t*>(z.raw.data());
        s.avail_in = static_cast<uint32_t>(got);
      }
      const bool file_ended = s.avail_in == 0 && z.raw_eof;
      if (file_ended && !z.in_member) break;  // the data ends between members
      z.in_member = true;
      const uint32_t in_before = s.avail_in, out_before = s.avail_out;
      int status = isal_inflate(&s);
      z.raw_consumed += in_before - s.avail_in;
      if (status < 0)
        throw DataLossError("'" + path_ + "' is not valid " +
                            std::string(compression_name(compression_)) +
                            " data (at compressed byte " + std::to_string(z.raw_consumed) +
                            "): " + std::string(inflate_error(status)) +
                            "; check the compression type, or the file is corrupt");
      if (s.block_state == ISAL_BLOCK_FINISH) {
        // Concatenated members (gzip allows them) continue after a reset.
        z.in_member = false;
        z.reset_keeping_input();
        continue;
      }
      // With the file's bytes all handed over, the inflater may still hold some of its own (it
      // keeps a stream's last bytes, a ZLIB trailer for one, in its state and finishes on a
      // later call); only a call that gives nothing more means the stream was cut short.
      if (file_ended && s.avail_out == out_before)
        throw DataLossError("'" + path_ + "' is truncated: the " +
                            std::string(compression_name(compression_)) +
                            " stream ends without its trailer after " +
                            std::to_string(z.raw_consumed) + " compressed bytes");
    }
    written += slice - s.avail_out;
    if (s.avail_out > 0) break;  // the data ended
  }
  return written;
}

uint64_t InputStream::max_remaining() const {
  if (!inflater_) return file_bytes_ > offset() ? file_bytes_ - offset() : 0;
  // Deflate expands at most 1032:1; gzip and zlib framing only add bytes.
  constexpr uint64_t kMaxExpansion = 1032;
  uint64_t compressed_left = file_bytes_ - std::min(file_bytes_, inflater_->raw_consumed);
  constexpr uint64_t kInflaterSlack = uint64_t{1} << 16;  // output held inside the inflater
  return (end_ - begin_) + compressed_left * kMaxExpansion + kInflaterSlack;
}

size_t InputStream::read(void* out, size_t size) {
  char* dst = static_cast<char*>(out);
  size_t total = 0;
  while (total < size) {
    if (begin_ == end_ && size - total >= buffer_.size()) {
      // A read of a buffer or more goes straight into `out`: no second copy of the bytes.
      buffer_offset_ += end_;
      begin_ = end_ = 0;
      const size_t want = size - total;
      const size_t got = produce(dst + total, want);
      buffer_offset_ += got;
      total += got;
      if (got < want) break;  // the data ended
      continue;
    }
    if (begin_ == end_ && !refill()) break;
    size_t piece = std::min(size - total, end_ - begin_);
    std::memcpy(dst + total, buffer_.data() + begin_, piece);
    begin_ += piece;
    total += piece;
  }
  return total;
}

std::string_view InputStream::peek() {
  if (begin_ == end_) refill();
  return std::string_view(buffer_.data() + begin_, end_ - begin_);
}

void InputStream::consume(size_t count) { begin_ += std::min(count, end_ - begin_); }

void InputStream::rewind() {
  if (::lseek(fd_, 0, SEEK_SET) < 0) throw_file_error(path_, "seek in", errno);
  begin_ = end_ = 0;
  buffer_offset_ = 0;
  if (inflater_) {
    isal_inflate_reset(&inflater_->state);
    inflater_->state.crc_flag = inflater_->wrapper;
    inflater_->state.avail_in = 0;
    inflater_->raw_eof = false;
    inflater_->in_member = false;
    inflater_->raw_consumed = 0;
  }
}

void InputStream::seek(uint64_t target) {
  if (target >= buffer_offset_ && target <= buffer_offset_ + end_) {
    begin_ = static_cast<size_t>(target - buffer_offset_);
    return;
  }
  if (!inflater_) {
    if (::lseek(fd_, static_cast<off_t>(target), SEEK_SET) < 0)
      throw_file_error(path_, "seek in", errno);
    begin_ = end_ = 0;
    buffer_offset_ = target;
    return;
  }
  if (target < offset()) rewind();
  while (offset() < target) {
    if (begin_ == end_ && !refill())
      throw OutOfRangeError("cannot seek to byte " + std::to_string(target) + " of '" + path_ +
                            "': its data ends at byte " + std::to_string(offset()));
    begin_ += static_cast<size_t>(std::min<uint64_t>(target - offset(), end_ - begin_));
  }
}

// --- OutputStream ---

struct OutputStream::Deflater {
  z_stream stream{};
  std::vector<char> out = std::vector<char>(kRawChunk);
};

OutputStream::OutputStream(std::string path, Compression compression, size_t buffer_size)
    : path_(std::move(path)),
      compression_(compression),
      buffer_(std::max<size_t>(buffer_size, 4096)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_file_error(path_, "create", errno);
  if (compression_ != Compression::kNone) {
    deflater_ = std::make_unique<Deflater>();
    if (deflateInit2(&deflater_->stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                     window_bits(compression_), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      ::close(fd_);
      throw ResourceExhaustedError("zlib could not start compressing '" + path_ + "'");
    }
  }
}

OutputStream::~OutputStream() {
  try {
    close();
  } catch (...) {  // destructors must not throw; close() explicitly to see errors
  }
}

void OutputStream::write_raw(const char* data, size_t size) {
  while (size > 0) {
    ssize_t put = ::write(fd_, data, size);
    if (put < 0) {
      if (errno == EINTR) continue;
      throw_file_error(path_, "write to", errno);
    }
    data += put;
    size -= static_cast<size_t>(put);
  }
}

void OutputStream::deflate_buffer(int flush_mode) {
  z_stream& s = deflater_->stream;
  s.next_in = reinterpret_cast<Bytef*>(buffer_.data());
  s.avail_in = static_cast<uInt>(used_);
  for (;;) {
    s.next_out = reinterpret_cast<Bytef*>(deflater_->out.data());
    s.avail_out = static_cast<uInt>(deflater_->out.size());
    int status = deflate(&s, flush_mode);
    if (status == Z_STREAM_ERROR) throw InternalError("zlib failed compressing '" + path_ + "'");
    write_raw(deflater_->out.data(), deflater_->out.size() - s.avail_out);
    if (flush_mode == Z_FINISH ? status == Z_STREAM_END : (s.avail_in == 0 && s.avail_out > 0))
      break;
  }
  used_ = 0;
}

void OutputStream::write(const void* data, size_t size) {
  if (fd_ < 0) throw FailedPreconditionError("write to '" + path_ + "' after close()");
  const char* src = static_cast<const char*>(data);
  while (size > 0) {
    if (used_ == buffer_.size()) {
      if (deflater_)
        deflate_buffer(Z_NO_FLUSH);
      else
        write_raw(buffer_.data(), used_), used_ = 0;
    }
    size_t piece = std::min(size, buffer_.size() - used_);
    std::memcpy(buffer_.data() + used_, src, piece);
    used_ += piece;
    src += piece;
    size -= piece;
  }
}

void OutputStream::flush() {
  if (fd_ < 0) return;
  if (deflater_) {
    deflate_buffer(Z_SYNC_FLUSH);
  } else {
    write_raw(buffer_.data(), used_);
    used_ = 0;
  }
}

void OutputStream::close() {
  if (fd_ < 0) return;
  int fd = fd_;
  try {
    if (deflater_) {
      deflate_buffer(Z_FINISH);
      deflateEnd(&deflater_->stream);
      deflater_.reset();
    } else {
      write_raw(buffer_.data(), used_);
      used_ = 0;
    }
  } catch (...) {
    if (deflater_) deflateEnd(&deflater_->stream);
    deflater_.reset();
    fd_ = -1;
    ::close(fd);
    throw;
  }
  fd_ = -1;
  if (::close(fd) != 0) throw_file_error(path_, "close", errno);
}

}  // namespace est::data
