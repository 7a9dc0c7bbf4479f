// The GPU's id checks without a host synchronisation in the step: sparse cross-entropy's labels
// and gather's indices are checked by the op's own kernel, which lowers a per-call flag to the
// first bad position (and writes NaN or zeros there, as TensorFlow's GPU kernels do); a one-
// thread kernel queued after it copies the first bad id of the device into a record in mapped
// pinned host memory. Nothing waits: the record is read at the next point where the host waits
// for the device anyway (synchronize(), a copy to the host such as Tensor::item or Tensor::to),
// which then throws the InvalidArgumentError naming the op, the id, its position and the valid
// range, and clears the record. The same holds for a captured step's replays. Before, each call
// copied its flag back and waited (a host synchronisation per op per step).
//
// The record's layout and message are plain C++ (tested on any machine); record_bad_id and
// raise_bad_ids exist where EST_HAVE_CUDA is 1.
#pragma once

#include <cstdint>
#include <string>

#include "ops/dtype.h"

namespace est::ops::cuda {

enum class IdCheckOp : int32_t { kNone = 0, kSparseCrossEntropy = 1, kGather = 2 };

struct IdCheckRecord {  // the first bad id on a device since the last check
  int32_t op = 0;       // an IdCheckOp; kNone: nothing recorded
  int32_t axis = 0;     // gather's axis
  int64_t position = 0;
  int64_t id = 0;
  int64_t limit = 0;  // ids must be in [0, limit)
};

// The error's message for `record` on /gpu:`device`.
std::string bad_id_message(const IdCheckRecord& record, int device);

// Queues on `device`'s compute stream: when *device_flag (lowered by the op's kernel, ULLONG_MAX
// for none) names a position of `ids` and the device has no record yet, records it.
void record_bad_id(int device, IdCheckOp op, const int64_t* device_flag, DType index_dtype,
                   const void* ids, int64_t limit, int axis);
// After the host has waited for `device`'s compute stream: throws the recorded bad id's
// InvalidArgumentError, if any, and clears the record.
void raise_bad_ids(int device);

}  // namespace est::ops::cuda
