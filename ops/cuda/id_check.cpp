// The asynchronous id checks' record per device (ops/cuda/id_check.h): mapped pinned host memory
// that a one-thread kernel writes and the host reads after it has waited for the device.
#include "ops/cuda/id_check.h"

#include <mutex>
#include <vector>

#include "ops/cuda/check.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/softmax_loss.h"
#include "ops/error.h"

namespace est::ops::cuda {
namespace {

struct Record {
  IdCheckRecord* host = nullptr;  // the same memory, as the host and the device see it
  void* device = nullptr;
};

// Made on a device's first checked op, kept for the process's lifetime (like the streams).
Record& record_of(int device) {
  static std::mutex mutex;
  static std::vector<Record>* records = new std::vector<Record>();
  std::lock_guard lock(mutex);
  if (records->size() <= static_cast<size_t>(device))
    records->resize(static_cast<size_t>(device) + 1);
  Record& record = (*records)[static_cast<size_t>(device)];
  if (record.host == nullptr) {
    DeviceGuard guard(device);
    void* memory = nullptr;
    EST_CUDA_CHECK(cudaHostAlloc(&memory, sizeof(IdCheckRecord), cudaHostAllocMapped));
    record.host = new (memory) IdCheckRecord();
    EST_CUDA_CHECK(cudaHostGetDevicePointer(&record.device, memory, 0));
  }
  return record;
}

}  // namespace

void record_bad_id(int device, IdCheckOp op, const int64_t* device_flag, DType index_dtype,
                   const void* ids, int64_t limit, int axis) {
  queue_bad_id_record(device_flag, index_dtype == DType::kI64, ids, record_of(device).device,
                      static_cast<int32_t>(op), limit, axis, compute_stream(device));
}

void raise_bad_ids(int device) {
  Record& record = record_of(device);
  volatile IdCheckRecord* seen = record.host;
  if (seen->op == static_cast<int32_t>(IdCheckOp::kNone)) return;
  IdCheckRecord found;
  found.op = seen->op;
  found.axis = seen->axis;
  found.position = seen->position;
  found.id = seen->id;
  found.limit = seen->limit;
  seen->op = static_cast<int32_t>(IdCheckOp::kNone);  // the next bad id is recorded afresh
  throw InvalidArgumentError(bad_id_message(found, device));
}

}  // namespace est::ops::cuda
