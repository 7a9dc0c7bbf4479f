// Kernel choice calibrated on the machine that runs it (cudnn.benchmark's idea for the CPU
// backends): the first time an op of a kind with kernels on both CPU backends (ops/backend.h's
// OpKind) runs at a shape whose tensors hold at least kCalibrationMinBytes, the registry times
// each backend's kernel on that call's own arguments a few times and keeps the fastest for every
// later call at that shape. The static table (ops/backend_table.h, measured on one development
// machine) stays the choice for smaller work, where a timing is noise, and wherever calibration
// is off.
//
// The key is the registry op, the dtype and every tensor shape and scalar argument of the call
// (a convolution's window included): "conv2d_weights_from_output float32 64x28x28x1;...". The
// thread count is not part of it, so that a process's choice, and with it its results, do not
// change when the thread governor or a strategy changes the count (ops/backend.h's promise that
// the count never changes the bits); the choice is made at the count the first call runs with.
//
// Cached in memory for the process and in one file per CPU model (`kernel_choices-<model>.txt`,
// the model being /proc/cpuinfo's "model name" with the instruction-set level the multiversioned
// loops run at, since a virtual machine's model name can be generic) in the directory
// EST_KERNEL_CALIBRATION_CACHE names, else $XDG_CACHE_HOME/est, else $HOME/.cache/est;
// EST_KERNEL_CALIBRATION_CACHE=0 keeps choices in memory only. The file starts with a header
// naming the model, then one "key<TAB>backend" line per choice; it is read when the first key is
// looked up and appended after each new choice. A file that cannot be read, names another model
// or has a line that does not parse is ignored with one warning and removed: calibration then
// measures again and writes it afresh.
//
// Turning it off: EST_KERNEL_CALIBRATION=0 (read once, on first use) or
// set_kernel_calibration(false) keeps the static table for every shape; a BackendGuard forces
// its backend whatever was calibrated. The test suites run with it off (tests/main.cpp).
//
// Reproducibility. The backends do not give bitwise-equal results (their sums run in different
// orders), so the choice is fixed before the result it affects is computed, and kept: the first
// call at a shape is timed on both backends and then computed by the winner, and every later call
// at that shape uses the same winner, in this process and, through the cache file, in every
// later process on this CPU model. So a seeded run repeats bit for bit and a resumed run equals
// the uninterrupted one on the machine that made the choices. Each choice is logged once at INFO
// with its timings. A machine without the file (another model, a deleted cache, or
// EST_KERNEL_CALIBRATION_CACHE=0) measures again and, where the backends time within noise, may
// choose the other and differ in the last bits; the table's backend is kept unless the other is
// at least 1 / kCalibrationMargin times faster, which makes such flips rare. Where results must
// match bit for bit across machines, set EST_KERNEL_CALIBRATION=0 (the static table).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace est::ops {

// Work below this many bytes of tensor arguments keeps the table's choice.
inline constexpr int64_t kCalibrationMinBytes = 256 << 10;
// Another backend replaces the table's only when its best time is below this fraction of the
// table's.
inline constexpr double kCalibrationMargin = 0.9;
// Timed calls of each candidate (after one untimed warm-up call each); the best one counts.
inline constexpr int kCalibrationRuns = 3;

// Whether calibration is on: set_kernel_calibration's value, else EST_KERNEL_CALIBRATION
// ("0"/"false"/"off" turn it off; unset or anything else leaves it on).
bool kernel_calibration_enabled();
void set_kernel_calibration(bool enabled);
// Re-reads EST_KERNEL_CALIBRATION (tests); returns the result.
bool set_kernel_calibration_from_environment();

// The directory of the process's cache file ("" for none): see the header comment.
std::string calibration_cache_directory();

// This CPU's model string: /proc/cpuinfo's first "model name" (or "unknown cpu"), then the
// multiversion instruction-set level.
std::string cpu_model();

// Times candidate `index` once and returns its seconds (infinity when it cannot run the case).
using CandidateTimer = std::function<double(size_t index)>;

// The index among `count` candidates with the smallest best-of-`runs` time (after one untimed
// call each), keeping `preferred` unless another's best is below kCalibrationMargin times
// preferred's; a candidate that beats `preferred` so is timed `runs` more times beside it before
// it wins. `best_seconds`, when given, receives each candidate's best time.
size_t fastest_candidate(size_t count, size_t preferred, int runs, const CandidateTimer& timer,
                         std::vector<double>* best_seconds = nullptr);

// The process's choices: key -> backend, in memory and, when `directory` is set, in a file per
// CPU model there. Thread-safe; the first choice stored for a key wins.
class KernelChoiceCache {
 public:
  explicit KernelChoiceCache(std::string cpu_model, std::string directory = "");

  std::optional<Backend> find(const std::string& key);
  // Stores `backend` for `key` unless a choice is there already; returns the stored choice.
  Backend store(const std::string& key, Backend backend);
  size_t size();
  // The file this cache reads and appends ("" without a directory).
  const std::string& path() const { return path_; }
  const std::string& cpu_model() const { return cpu_model_; }

  // The process's cache: this CPU's model, calibration_cache_directory().
  static KernelChoiceCache& global();

 private:
  void load_locked();

  std::string cpu_model_, path_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::map<std::string, Backend> choices_;
};

// Chooses between `candidates` (CPU backends, at least two) for `key`: the cached choice, else
// fastest_candidate over `timer` (indices into `candidates`), stored in `cache` and logged.
// `table` is the static table's backend for the kind.
Backend calibrated_backend(KernelChoiceCache& cache, const std::string& key,
                           const std::vector<Backend>& candidates, Backend table,
                           const CandidateTimer& timer);

}  // namespace est::ops
