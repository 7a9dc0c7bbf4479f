// The NCCL unique id's key and its exchange through the coordination service (see the header).
#include "distribute/nccl_unique_id.h"

#include <fmt/format.h>

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

}  // namespace est::distribute
