// How the CUDA reduction of reduce.cu lays out one [outer, r, inner] pass with inner > 1 (sums
// or maxima over r, for each of the outer * inner output columns) over threads and blocks.
//
// A reduction over many rows into few columns (the conv bias gradient: r = batch * height *
// width rows, inner = a few dozen channels) once ran as one block whose threads each walked all
// r rows of one column: a few threads busy on the whole GPU. The plan instead gives each block
// a tile of `column_threads` neighbouring columns (coalesced reads) by `row_threads` rows, and
// splits the rows into `row_chunks` chunks of `rows_per_chunk` along the grid's y so that there
// are about kBlocksPerMultiprocessor blocks per multiprocessor; with more than one chunk each
// block writes its partial result to a workspace [row_chunks, columns] of the accumulator type
// and a second launch combines the chunks in order (the result does not depend on timing).
// Host code with no CUDA type, in every build so that its test runs everywhere
// (tests/ops/cuda_plans_test.cpp).
#pragma once

#include <cstdint>

namespace est::ops::cuda {

constexpr int kReduceBlockThreads = 256;     // threads per block, column_threads * row_threads
constexpr int kBlocksPerMultiprocessor = 4;  // the grid the plan aims for
constexpr int64_t kMinRowsPerThread = 16;    // a chunk gives each thread at least this many
constexpr int64_t kMaxRowChunks = 65535;     // the grid's y limit

struct ColumnReducePlan {
  int64_t columns = 0;         // outer * inner: the outputs
  int column_threads = 1;      // columns per block (a power of two up to 32)
  int row_threads = 1;         // rows a block reads at once (kReduceBlockThreads / column_threads)
  int64_t column_blocks = 0;   // ceil(columns / column_threads): the grid's x
  int64_t row_chunks = 1;      // the grid's y; 1: each block writes the outputs directly
  int64_t rows_per_chunk = 0;  // ceil(r / row_chunks); every chunk has at least one row
};

// The plan for `outer` x `r` x `inner` (any inner, 1 included) on a GPU of `multiprocessors`
// multiprocessors; outer * inner > 0. With r == 0 one chunk of no rows writes the initial
// values (0 for a sum).
ColumnReducePlan plan_column_reduce(int64_t outer, int64_t r, int64_t inner, int multiprocessors);

// True when a pass is better run one block per row (reduce.cu's row kernel): inner == 1 and
// enough rows to give every multiprocessor kBlocksPerMultiprocessor of them.
bool reduce_by_rows(int64_t outer, int64_t inner, int multiprocessors);

}  // namespace est::ops::cuda
