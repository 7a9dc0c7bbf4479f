// Calibrated kernel choice (see kernel_calibration.h): the switch, the CPU's model, the timing
// rule and the cache with its file.
#include "ops/kernel_calibration.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "ops/cpu/isa.h"
#include "ops/environment_switch.h"
#include "ops/logging.h"

namespace est::ops {
namespace {

bool environment_enables_calibration() {
  const char* value = std::getenv("EST_KERNEL_CALIBRATION");
  const std::string text = value == nullptr ? "" : value;
  return !(text == "0" || text == "false" || text == "FALSE" || text == "False" || text == "off");
}

EnvironmentSwitch& calibration_switch() {
  static EnvironmentSwitch state(environment_enables_calibration);
  return state;
}

// The model string made safe as part of a file name.
std::string file_name_part(const std::string& model) {
  std::string part;
  for (char c : model) part += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return part;
}

constexpr const char* kHeader = "# est kernel choices for cpu: ";

std::optional<Backend> parse_backend(const std::string& name) {
  for (Backend backend : {Backend::kReference, Backend::kOneDnn})
    if (name == backend_name(backend)) return backend;
  return std::nullopt;
}

}  // namespace

bool kernel_calibration_enabled() { return calibration_switch().on(); }

void set_kernel_calibration(bool enabled) { calibration_switch().set(enabled); }

bool set_kernel_calibration_from_environment() { return calibration_switch().reload(); }

std::string cpu_model() {
  std::string model = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    if (start != std::string::npos) model = line.substr(start);
    break;
  }
  return model + " " + std::string(cpu::multiversion_isa());
}

size_t fastest_candidate(size_t count, size_t preferred, int runs, const CandidateTimer& timer,
                         std::vector<double>* best_seconds) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> best(count, kNever);
  // `runs` rounds over `which`, interleaved, so that a passing load slows every candidate.
  auto rounds = [&](const std::vector<size_t>& which) {
    for (int r = 0; r < runs; ++r)
      for (size_t i : which) best[i] = std::min(best[i], timer(i));
  };
  if (preferred >= count) preferred = 0;
  auto pick = [&] {
    size_t chosen = preferred;
    for (size_t i = 0; i < count; ++i)
      if (i != preferred && best[i] < kCalibrationMargin * best[preferred] &&
          (chosen == preferred || best[i] < best[chosen]))
        chosen = i;
    return chosen;
  };
  std::vector<size_t> all(count);
  for (size_t i = 0; i < count; ++i) all[i] = i;
  for (size_t i : all) timer(i);  // warm-up: primitives, allocator, caches
  rounds(all);
  size_t chosen = pick();
  // Leaving the table is the choice a preempted timing can get wrong (a loaded machine stalls one
  // call for milliseconds): time both again before it stands.
  if (chosen != preferred) {
    rounds({preferred, chosen});
    chosen = pick();
  }
  if (best_seconds != nullptr) *best_seconds = best;
  return chosen;
}

KernelChoiceCache::KernelChoiceCache(std::string cpu_model, std::string directory)
    : cpu_model_(std::move(cpu_model)) {
  if (!directory.empty())
    path_ = (std::filesystem::path(directory) /
             ("kernel_choices-" + file_name_part(cpu_model_) + ".txt"))
                .string();
}

void KernelChoiceCache::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  if (path_.empty() || !std::filesystem::exists(path_)) return;
  std::ifstream in(path_);
  std::string line;
  if (!std::getline(in, line) || line != kHeader + cpu_model_) {
    log::warning(
        "kernel calibration: ignoring {}: its first line is not '{}{}' (another CPU's file, or "
        "a damaged one); choices are measured again and the file is rewritten",
        path_, kHeader, cpu_model_);
    std::filesystem::remove(path_);
    return;
  }
  std::map<std::string, Backend> read;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.rfind("# ", 0) == 0) continue;  // a second process's header, written concurrently
    const size_t tab = line.rfind('\t');
    const std::optional<Backend> backend =
        tab == std::string::npos ? std::nullopt : parse_backend(line.substr(tab + 1));
    if (!backend) {
      log::warning(
          "kernel calibration: ignoring {}: line {} is not 'key<TAB>backend' with backend "
          "reference or onednn; choices are measured again and the file is rewritten",
          path_, number);
      std::filesystem::remove(path_);
      return;
    }
    read.emplace(line.substr(0, tab), *backend);
  }
  choices_.insert(read.begin(), read.end());
}

std::optional<Backend> KernelChoiceCache::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  load_locked();
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

Backend KernelChoiceCache::store(const std::string& key, Backend backend) {
  std::lock_guard lock(mutex_);
  load_locked();
  auto [it, inserted] = choices_.emplace(key, backend);
  if (inserted && !path_.empty()) {
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), error);
    const bool fresh = !std::filesystem::exists(path_);
    std::ofstream out(path_, std::ios::app);
    if (fresh) out << kHeader << cpu_model_ << '\n';
    out << key << '\t' << backend_name(backend) << '\n';
    if (!out)
      log::warning("kernel calibration: cannot write {}; choices stay in this process only", path_);
  }
  return it->second;
}

size_t KernelChoiceCache::size() {
  std::lock_guard lock(mutex_);
  load_locked();
  return choices_.size();
}

std::string calibration_cache_directory() {
  const char* chosen = std::getenv("EST_KERNEL_CALIBRATION_CACHE");
  if (chosen != nullptr) return std::string(chosen) == "0" ? "" : chosen;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return (std::filesystem::path(xdg) / "est").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0')
    return (std::filesystem::path(home) / ".cache" / "est").string();
  return "";
}

KernelChoiceCache& KernelChoiceCache::global() {
  static KernelChoiceCache cache(ops::cpu_model(), calibration_cache_directory());
  return cache;
}

Backend calibrated_backend(KernelChoiceCache& cache, const std::string& key,
                           const std::vector<Backend>& candidates, Backend table,
                           const CandidateTimer& timer) {
  if (std::optional<Backend> cached = cache.find(key)) return *cached;
  const size_t preferred = static_cast<size_t>(
      std::find(candidates.begin(), candidates.end(), table) - candidates.begin());
  std::vector<double> best;
  const size_t chosen =
      fastest_candidate(candidates.size(), preferred, kCalibrationRuns, timer, &best);
  const Backend stored = cache.store(key, candidates[chosen]);
  std::string timings;
  for (size_t i = 0; i < candidates.size(); ++i)
    timings +=
        fmt::format("{}{}={:.1f}us", i ? " " : "", backend_name(candidates[i]), 1e6 * best[i]);
  log::info("kernel calibration: {} -> {} ({}; table: {})", key, backend_name(stored), timings,
            backend_name(table));
  return stored;
}

}  // namespace est::ops
