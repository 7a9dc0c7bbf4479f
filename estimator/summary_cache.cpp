// The process-wide map of log directory -> SummaryWriter.
#include "estimator/summary_cache.h"

#include <filesystem>
#include <map>
#include <mutex>

namespace est {
namespace {

std::mutex cache_mutex;
std::map<std::string, std::shared_ptr<SummaryWriter>>& cache() {
  static auto* writers = new std::map<std::string, std::shared_ptr<SummaryWriter>>();
  return *writers;
}

}  // namespace

std::shared_ptr<SummaryWriter> summary_writer_for(const std::string& logdir) {
  std::error_code error;
  std::filesystem::path path = std::filesystem::weakly_canonical(logdir, error);
  std::string key = error ? logdir : path.string();
  std::lock_guard lock(cache_mutex);
  auto& slot = cache()[key];
  if (!slot || !std::filesystem::exists(key)) slot = std::make_shared<SummaryWriter>(logdir);
  return slot;
}

void flush_summary_writers() {
  std::lock_guard lock(cache_mutex);
  for (auto& [dir, writer] : cache()) writer->flush();
}

}  // namespace est
