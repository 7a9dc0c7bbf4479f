// fsync, durable rename and temporary names (POSIX).
#include "checkpoint/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "ops/error.h"

namespace est::checkpoint {
namespace {

constexpr std::string_view kTemporaryMarker = ".tmp-";

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

void fsync_path(const std::filesystem::path& path, int flags, const char* what) {
  FileDescriptor fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (fd.get() < 0)
    throw_errno(errno, fmt::format("opening {} {} to fsync it", what, path.string()));
  if (::fsync(fd.get()) != 0)
    throw_errno(errno, fmt::format("fsync of {} {}", what, path.string()));
}

}  // namespace

void throw_errno(int error, const std::string& what) {
  std::string message = fmt::format("{} failed: {}", what, std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      throw NotFoundError(message + "; check the path");
    case EACCES:
    case EPERM:
    case EROFS:
      throw PermissionDeniedError(message + "; check the permissions of the directory");
    case ENOSPC:
    case EDQUOT:
      throw ResourceExhaustedError(message + "; free disk space or lower keep_checkpoint_max");
    case EEXIST:
      throw AlreadyExistsError(message);
    default:
      throw UnavailableError(message + "; check the file system");
  }
}

std::filesystem::path temporary_path_for(const std::filesystem::path& final_path) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path result = final_path;
  result += fmt::format("{}{}-{}", kTemporaryMarker, ::getpid(), counter.fetch_add(1));
  return result;
}

bool is_temporary_name(std::string_view file_name) {
  return file_name.find(kTemporaryMarker) != std::string_view::npos;
}

std::optional<int> temporary_owner(std::string_view file_name) {
  size_t marker = file_name.rfind(kTemporaryMarker);
  if (marker == std::string_view::npos) return std::nullopt;
  std::string_view rest = file_name.substr(marker + kTemporaryMarker.size());
  int pid = 0;
  auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  if (error != std::errc() || end == rest.data() || pid <= 0 || end == rest.data() + rest.size() ||
      *end != '-')
    return std::nullopt;
  return pid;
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

void fsync_file(const std::filesystem::path& path) { fsync_path(path, O_RDONLY, "file"); }

void fsync_directory(const std::filesystem::path& directory) {
  fsync_path(directory.empty() ? std::filesystem::path(".") : directory, O_RDONLY | O_DIRECTORY,
             "directory");
}

void rename_durably(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw_errno(errno, fmt::format("renaming {} to {}", from.string(), to.string()));
  fsync_directory(to.parent_path());
}

void write_file_durably(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::path temporary = temporary_path_for(path);
  FileDescriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw_errno(errno, fmt::format("creating {}", temporary.string()));
  try {
    size_t written = 0;
    while (written < contents.size()) {
      ssize_t n = ::write(fd.get(), contents.data() + written, contents.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno(errno, fmt::format("writing {}", temporary.string()));
      written += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) throw_errno(errno, fmt::format("fsync of {}", temporary.string()));
    if (::close(fd.release()) != 0)
      throw_errno(errno, fmt::format("closing {}", temporary.string()));
    rename_durably(temporary, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

void ensure_directory(const std::filesystem::path& directory) {
  if (directory.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw_errno(error.value(), fmt::format("creating directory {}", directory.string()));
  if (!std::filesystem::is_directory(directory))
    throw FailedPreconditionError(
        fmt::format("{} exists but is not a directory; pass a directory for the checkpoints",
                    directory.string()));
}

int remove_stale_temporaries(const std::filesystem::path& directory, std::string_view prefix) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !entry.is_regular_file(error)) continue;
    std::optional<int> owner = temporary_owner(name);
    if (!owner || *owner == ::getpid() || process_alive(*owner)) continue;
    if (std::filesystem::remove(entry.path(), error)) ++removed;
  }
  return removed;
}

int64_t read_file_range(int fd, int64_t offset, int64_t size, char* out,
                        const std::function<void(const char* piece, size_t bytes)>& each_piece) {
  constexpr int64_t kPiece = int64_t{8} << 20;
  int64_t done = 0;
  while (done < size) {
    const int64_t piece = std::min(size - done, kPiece);
    int64_t got = 0;
    while (got < piece) {
      const ssize_t n = ::pread(fd, out + done + got, static_cast<size_t>(piece - got),
                                static_cast<off_t>(offset + done + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
    if (got != piece) return done + got;
    if (each_piece) each_piece(out + done, static_cast<size_t>(piece));
    done += piece;
  }
  return done;
}

}  // namespace est::checkpoint
