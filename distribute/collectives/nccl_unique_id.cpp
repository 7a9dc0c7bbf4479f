// The NCCL unique id's key and its exchange through the coordination service (see the header).
#include "distribute/collectives/nccl_unique_id.h"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "ops/error.h"

namespace est::distribute {

std::string nccl_unique_id_key(uint64_t job_incarnation, int communicator) {
  return fmt::format("nccl/unique_id/job-{:016x}/comm-{}", job_incarnation, communicator);
}

std::string exchange_nccl_unique_id(const KeyValueStore& store, bool is_chief,
                                    uint64_t job_incarnation, int communicator,
                                    const std::function<std::string()>& make_id,
                                    std::chrono::milliseconds timeout) {
  std::string key = nccl_unique_id_key(job_incarnation, communicator);
  std::string id;
  if (is_chief) {
    id = make_id();
    if (id.size() == kNcclUniqueIdBytes) store.set(key, id);
  } else {
    id = store.get(key, timeout);
  }
  if (id.size() != kNcclUniqueIdBytes)
    throw DataLossError(fmt::format(
        "the NCCL unique id under '{}' in the coordination service has {} bytes, not {}: the "
        "tasks of the job run different builds of est or NCCL; run the same build everywhere",
        key, id.size(), kNcclUniqueIdBytes));
  return id;
}

std::string nccl_capability(const std::string& host, bool usable,
                            const std::vector<std::string>& bus_ids) {
  std::string ids;
  for (const std::string& id : bus_ids) ids += (ids.empty() ? "" : ",") + id;
  return fmt::format("{}\t{}\t{}", host, usable ? "yes" : "no", usable ? ids : "");
}

std::string nccl_unusable_reason(const std::vector<std::string>& capabilities,
                                 const std::vector<std::string>& tasks) {
  std::map<std::string, size_t> owner;  // "host bus id" -> rank
  for (size_t r = 0; r < capabilities.size(); ++r) {
    std::vector<std::string> fields;
    std::stringstream in(capabilities[r]);
    for (std::string field; std::getline(in, field, '\t');) fields.push_back(field);
    const std::string& name = r < tasks.size() ? tasks[r] : fmt::format("rank {}", r);
    if (fields.size() < 2 || fields[1] != "yes")
      return fmt::format("{} has devices other than GPUs (or no CUDA build)", name);
    std::stringstream ids(fields.size() > 2 ? fields[2] : "");
    for (std::string id; std::getline(ids, id, ',');) {
      auto [it, fresh] = owner.emplace(fields[0] + " " + id, r);
      if (!fresh)
        return fmt::format(
            "{} and {} share GPU {} on host {} (NCCL allows one rank per GPU; give each worker "
            "its own GPUs, e.g. with CUDA_VISIBLE_DEVICES)",
            it->second < tasks.size() ? tasks[it->second] : fmt::format("rank {}", it->second),
            name, id, fields[0]);
    }
  }
  return "";
}

}  // namespace est::distribute
