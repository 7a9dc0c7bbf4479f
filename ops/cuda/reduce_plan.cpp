// plan_column_reduce: the thread and block layout of a column reduction (ops/cuda/reduce_plan.h).
#include "ops/cuda/reduce_plan.h"

#include <algorithm>

namespace est::ops::cuda {

ColumnReducePlan plan_column_reduce(int64_t outer, int64_t r, int64_t inner, int multiprocessors) {
  ColumnReducePlan plan;
  plan.columns = outer * inner;
  if (r <= 0) {  // an empty sum or maximum: one chunk of no rows writes the initial values
    plan.column_blocks = plan.columns;
    return plan;
  }
  // Neighbouring threads take neighbouring columns of one row: as many as `inner` (up to a
  // warp), so that a narrow tensor does not leave most of the block idle.
  int width = 1;
  while (width < 32 && width < inner) width *= 2;
  plan.column_threads = width;
  plan.row_threads = kReduceBlockThreads / width;
  plan.column_blocks = (plan.columns + width - 1) / width;
  // Chunks of rows until the grid fills the GPU, but never so many that a thread gets fewer
  // than kMinRowsPerThread rows (the partial results would cost more than they save).
  const int64_t target_blocks = int64_t{std::max(multiprocessors, 1)} * kBlocksPerMultiprocessor;
  const int64_t wanted = (target_blocks + plan.column_blocks - 1) / plan.column_blocks;
  const int64_t rows_per_block_min = plan.row_threads * kMinRowsPerThread;
  const int64_t at_most = std::max<int64_t>(1, r / rows_per_block_min);
  const int64_t chunks = std::clamp<int64_t>(wanted, 1, std::min(at_most, kMaxRowChunks));
  plan.rows_per_chunk = (r + chunks - 1) / chunks;
  plan.row_chunks = (r + plan.rows_per_chunk - 1) / plan.rows_per_chunk;
  return plan;
}

bool reduce_by_rows(int64_t outer, int64_t inner, int multiprocessors) {
  return inner == 1 && outer >= int64_t{std::max(multiprocessors, 1)} * kBlocksPerMultiprocessor;
}

}  // namespace est::ops::cuda
