// The exchange of an NCCL unique id through the coordination service's key-value store: the
// chief (rank 0's task) makes the id (ncclGetUniqueId) and publishes its 128 bytes; every other
// task reads them, waiting at most the rendezvous timeout. It names no NCCL type, so the naming
// and the stale-id rule are tested where no GPU (or no CUDA) is.
//
// The key is scoped by the job's incarnation (a random number the coordination service draws
// when it starts, so a restarted job has a new one) and by the communicator's number within the
// job: a task of a restarted job never reads the id of the job before it, which would make it
// wait for ranks that are gone.
//
// Before that, every task says whether it can take part (all its devices GPUs, a CUDA build)
// and which physical GPUs (PCI bus ids) it holds; NCCL refuses two ranks on one GPU, which
// happens when several workers of a host share its only GPU. nccl_unusable_reason() decides
// from every task's answer, the same way on every task.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace est::distribute {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES

// "nccl/unique_id/job-00c0ffee12345678/comm-0"
std::string nccl_unique_id_key(uint64_t job_incarnation, int communicator);

// The coordination client's set / get (tests pass a fake). `get` waits for the key up to its
// timeout and throws (DeadlineExceededError) when it does not appear.
struct KeyValueStore {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key, std::chrono::milliseconds timeout)> get;
};

// The chief calls `make_id` and publishes its result; every other task reads it. Returns the
// kNcclUniqueIdBytes bytes; DataLossError when they are not that many (`make_id`'s or the
// store's), naming the key.
std::string exchange_nccl_unique_id(const KeyValueStore& store, bool is_chief,
                                    uint64_t job_incarnation, int communicator,
                                    const std::function<std::string()>& make_id,
                                    std::chrono::milliseconds timeout);

// One task's answer: "HOST<TAB>yes|no<TAB>BUSID,BUSID" (bus ids empty for "no").
std::string nccl_capability(const std::string& host, bool usable,
                            const std::vector<std::string>& bus_ids);
// From every task's nccl_capability (by rank, named by `tasks`): "" when NCCL can join them
// all, else why not ("worker 1 has no GPU", "worker 0 and worker 1 share GPU 0000:1a:00.0 on
// host h").
std::string nccl_unusable_reason(const std::vector<std::string>& capabilities,
                                 const std::vector<std::string>& tasks);

}  // namespace est::distribute
