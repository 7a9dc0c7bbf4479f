// bad_id_message: the text of an asynchronous id check's error (ops/cuda/id_check.h); the
// reference kernels' words (ops/cpu/loss_kernels.cpp, ops/cpu/array_kernels.cpp), plus when and
// where the GPU found it.
#include <fmt/format.h>

#include "ops/cuda/id_check.h"

namespace est::ops::cuda {

std::string bad_id_message(const IdCheckRecord& record, int device) {
  const std::string when = fmt::format(
      "found on /gpu:{} by the op's asynchronous id check and reported at this synchronisation "
      "point (the op ran earlier, in this step or a replay of a captured one)",
      device);
  switch (static_cast<IdCheckOp>(record.op)) {
    case IdCheckOp::kSparseCrossEntropy:
      return fmt::format(
          "sparse_softmax_cross_entropy_with_logits: label {} at index {} is outside [0, {}): the "
          "logits have {} classes ({}); check the labels or the number of output units",
          record.id, record.position, record.limit, record.limit, when);
    case IdCheckOp::kGather:
      return fmt::format(
          "gather: index {} at position {} of the indices is outside [0, {}) for axis {} ({}); "
          "check the ids (vocabulary size, label range)",
          record.id, record.position, record.limit, record.axis, when);
    case IdCheckOp::kNone:
      break;
  }
  return fmt::format("an op's id check recorded op code {} ({})", record.op, when);
}

}  // namespace est::ops::cuda
