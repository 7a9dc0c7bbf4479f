// The file-system half of crash consistency: temporary names in the target's directory,
// fsync of files and directories, atomic replacement, and errno turned into est errors.
//
// A checkpoint or state file is written under a temporary name, fsynced, renamed over its
// final name, and the directory is fsynced so the rename itself is durable. A crash at any
// point leaves either the old file or the new one, plus at most a stray temporary file that
// remove_stale_temporaries() cleans up later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace est::checkpoint {

// "<dir>/<name>.tmp-<pid>-<counter>": unique per process and call, in the same directory.
std::filesystem::path temporary_path_for(const std::filesystem::path& final_path);
// True for names temporary_path_for() makes.
bool is_temporary_name(std::string_view file_name);
// The pid of the process that made a temporary name; nullopt when the name carries none.
std::optional<int> temporary_owner(std::string_view file_name);
// True while process `pid` exists on this host (kill(pid, 0), EPERM counting as alive).
bool process_alive(int pid);

// Flushes a file's data and metadata to the device (opens it read-only and fsyncs).
void fsync_file(const std::filesystem::path& path);
void fsync_directory(const std::filesystem::path& directory);

// rename(2) `from` over `to` (same directory), then fsyncs the directory.
void rename_durably(const std::filesystem::path& from, const std::filesystem::path& to);

// Writes `contents` to `path` through a fsynced temporary file and rename_durably().
void write_file_durably(const std::filesystem::path& path, std::string_view contents);

// Creates `directory` (and parents) when missing; PermissionDeniedError/UnavailableError
// naming it otherwise.
void ensure_directory(const std::filesystem::path& directory);

// Deletes temporary files left in `directory` by writers that died mid-write whose final name
// starts with `prefix`: only those whose pid names no running process, so another live
// process's save in flight is left alone (as are names without a pid). Returns how many it
// removed. Pids are this host's: a model directory shared over a network file system is
// written by one chief at a time (model_dir_lock.h), other tasks write their own
// subdirectories.
int remove_stale_temporaries(const std::filesystem::path& directory, std::string_view prefix);

// Reads bytes [offset, offset + size) of the file open as `fd` into `out` (a tensor's storage:
// no intermediate buffer) with pread(2) in 8 MB pieces, large enough for the kernel's readahead
// and small enough to stay in the cache, handing each piece to `each_piece` as it arrives (a
// checksum then costs no second pass over memory). Returns the bytes read: fewer than `size`
// only when the file ends first or a read fails; the caller names what came up short.
int64_t read_file_range(int fd, int64_t offset, int64_t size, char* out,
                        const std::function<void(const char* piece, size_t bytes)>& each_piece);

// Throws the est error matching errno `error` (ENOENT: NotFound, EACCES: PermissionDenied,
// ENOSPC: ResourceExhausted, ...) with `what` and the system's message.
[[noreturn]] void throw_errno(int error, const std::string& what);

}  // namespace est::checkpoint
