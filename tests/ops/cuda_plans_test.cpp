// The host-side plans of the CUDA backend, which need no GPU and so are tested everywhere:
//   - plan_column_reduce (ops/cuda/reduce_plan.h): the blocks and row chunks of a reduction with
//     few columns fill the GPU, and the plan, walked on the CPU exactly as reduce.cu's kernels
//     walk it, reads every element once and gives the plain sum;
//   - gemm_ints (ops/cuda/gemm_dims.h): sizes above cuBLAS's int range are a clear error;
//   - bad_id_message (ops/cuda/id_check.h): an asynchronous id check's error names the op, the
//     id, its position and range in the reference's words, and when it was found;
//   - HandlePool and ThreadHandles (ops/cuda/handle_pool.h): a thread's handles go back to the
//     pool when it ends and the next thread reuses them, so handles do not grow with threads.
#include <doctest/doctest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "ops/cuda/gemm_dims.h"
#include "ops/cuda/handle_pool.h"
#include "ops/cuda/id_check.h"
#include "ops/cuda/reduce_plan.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops::cuda;
using est::testing::contains;
using est::testing::error_message;

namespace {

// The sums reduce.cu computes with `plan` for in [outer, r, inner], walked block by block and
// thread by thread as the kernels do (the tree over threadIdx.y is a plain sum here); counts how
// often each element is read.
std::vector<double> walk(const ColumnReducePlan& plan, const std::vector<double>& in, int64_t r,
                         int64_t inner, std::vector<int>& reads) {
  std::vector<double> partials(static_cast<size_t>(plan.row_chunks * plan.columns), 0.0);
  for (int64_t chunk = 0; chunk < plan.row_chunks; ++chunk)
    for (int64_t block = 0; block < plan.column_blocks; ++block)
      for (int ty = 0; ty < plan.row_threads; ++ty)
        for (int tx = 0; tx < plan.column_threads; ++tx) {
          const int64_t column = block * plan.column_threads + tx;
          if (column >= plan.columns) continue;
          const int64_t first = chunk * plan.rows_per_chunk;
          const int64_t last = std::min(r, first + plan.rows_per_chunk);
          const int64_t base = (column / inner) * r * inner + column % inner;
          for (int64_t j = first + ty; j < last; j += plan.row_threads) {
            const size_t at = static_cast<size_t>(base + j * inner);
            partials[static_cast<size_t>(chunk * plan.columns + column)] += in[at];
            ++reads[at];
          }
        }
  std::vector<double> out(static_cast<size_t>(plan.columns), 0.0);
  for (int64_t column = 0; column < plan.columns; ++column)
    for (int64_t chunk = 0; chunk < plan.row_chunks; ++chunk)
      out[static_cast<size_t>(column)] +=
          partials[static_cast<size_t>(chunk * plan.columns + column)];
  return out;
}

}  // namespace

TEST_CASE("cuda plans: a reduction of many rows into few columns is split across blocks") {
  // The tutorial CNN's conv bias gradient at batch 64: 64 * 26 * 26 rows of 32 channels, on an
  // H100's 132 multiprocessors. One block of 32 busy threads before; now the grid fills the GPU.
  const ColumnReducePlan plan = plan_column_reduce(1, 64 * 26 * 26, 32, 132);
  CHECK(plan.columns == 32);
  CHECK(plan.column_threads == 32);
  CHECK(plan.row_threads == kReduceBlockThreads / 32);
  CHECK(plan.column_blocks == 1);
  CHECK(plan.row_chunks * plan.column_blocks >= 132);  // at least one block per multiprocessor
  CHECK(plan.row_chunks <= 132 * kBlocksPerMultiprocessor);
  CHECK(plan.rows_per_chunk >= plan.row_threads * kMinRowsPerThread);
  CHECK(plan.row_chunks * plan.rows_per_chunk >= 64 * 26 * 26);
  CHECK((plan.row_chunks - 1) * plan.rows_per_chunk < 64 * 26 * 26);  // no empty chunk
  // Three channels: the block is mostly rows.
  const ColumnReducePlan narrow = plan_column_reduce(1, 100000, 3, 132);
  CHECK(narrow.column_threads == 4);
  CHECK(narrow.row_threads == kReduceBlockThreads / 4);
  CHECK(narrow.row_chunks > 1);
  // Many columns, few rows: no split (the columns fill the grid themselves).
  const ColumnReducePlan wide = plan_column_reduce(1000, 8, 1000, 132);
  CHECK(wide.row_chunks == 1);
  CHECK(wide.rows_per_chunk == 8);
  // A full reduction of one long row (inner == 1, outer == 1) is split too; many rows are not.
  CHECK(plan_column_reduce(1, 10'000'000, 1, 132).row_chunks > 1);
  CHECK(!reduce_by_rows(1, 1, 132));
  CHECK(reduce_by_rows(100000, 1, 132));
  CHECK(!reduce_by_rows(100000, 2, 132));
  // No rows: one chunk that writes the initial value.
  const ColumnReducePlan empty = plan_column_reduce(2, 0, 5, 132);
  CHECK(empty.row_chunks == 1);
  CHECK(empty.rows_per_chunk == 0);
}

TEST_CASE("cuda plans: walking a column plan reads every element once and gives the sum") {
  struct Shape {
    int64_t outer, r, inner;
    int multiprocessors;
  };
  for (const Shape s : {Shape{1, 5000, 3, 8}, Shape{3, 777, 5, 16}, Shape{2, 9000, 40, 132},
                        Shape{1, 4096, 1, 4}, Shape{4, 3, 70, 132}, Shape{1, 1, 1, 1}}) {
    CAPTURE(s.outer);
    CAPTURE(s.r);
    CAPTURE(s.inner);
    std::vector<double> in(static_cast<size_t>(s.outer * s.r * s.inner));
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>((i * 7919) % 101) - 50;
    const ColumnReducePlan plan = plan_column_reduce(s.outer, s.r, s.inner, s.multiprocessors);
    std::vector<int> reads(in.size(), 0);
    const std::vector<double> out = walk(plan, in, s.r, s.inner, reads);
    for (int count : reads) REQUIRE(count == 1);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t c = 0; c < s.inner; ++c) {
        double expected = 0;
        for (int64_t j = 0; j < s.r; ++j)
          expected += in[static_cast<size_t>((o * s.r + j) * s.inner + c)];
        CHECK(out[static_cast<size_t>(o * s.inner + c)] == expected);
      }
  }
}

TEST_CASE("cuda plans: a GEMM size above cuBLAS's int range is an error naming it") {
  ops::cpu::MatmulDims dims;
  dims.m = 3;
  dims.n = 5;
  dims.k = 7;
  dims.batch = 2;
  dims.transpose_a = true;
  const GemmInts ints = gemm_ints(dims, "matmul");
  CHECK(ints.m == 3);
  CHECK(ints.n == 5);
  CHECK(ints.k == 7);
  CHECK(ints.lda == 3);  // A stored [K, M]
  CHECK(ints.ldb == 5);
  CHECK(ints.ldc == 5);
  CHECK(ints.batch == 2);
  dims.k = int64_t{1} << 31;
  CHECK(contains(error_message<InvalidArgumentError>([&] { gemm_ints(dims, "matmul"); }),
                 "matmul on the GPU: K (the summed dimension) is 2147483648, above cuBLAS's limit "
                 "of 2^31 - 1"));
  dims.k = 7;
  dims.m = int64_t{3} << 31;
  CHECK(contains(error_message<InvalidArgumentError>([&] { gemm_ints(dims, "matmul"); }),
                 "M (rows of the output) is 6442450944"));
  dims.m = (int64_t{1} << 31) - 1;  // the largest that fits
  CHECK(gemm_ints(dims, "matmul").m == 2147483647);
}

TEST_CASE("cuda plans: threads give their handles back, the next threads reuse them") {
  int next = 100;
  auto pool = std::make_shared<HandlePool<int>>([&next](int device) { return next++ + device; });
  auto use = [&pool](int device) {
    ThreadHandles<int> handles(pool);  // as a thread_local of a replica thread
    const int first = handles.get(device);
    CHECK(handles.get(device) == first);  // one handle per thread and device
    return first;
  };
  int seen = 0;
  for (int round = 0; round < 5; ++round) {  // threads that come and go, one at a time
    std::thread t([&] { seen = use(0); });
    t.join();
    CHECK(seen == 100);
  }
  CHECK(pool->created() == 1);
  CHECK(pool->available(0) == 1);
  {  // two at once need two; another device has its own
    ThreadHandles<int> a(pool), b(pool);
    CHECK(a.get(0) != b.get(0));
    CHECK(a.get(1) == 103);  // made for device 1 (102 + 1)
    CHECK(pool->created() == 3);
    CHECK(pool->available(0) == 0);
  }
  CHECK(pool->available(0) == 2);
  CHECK(pool->available(1) == 1);
}

TEST_CASE("cuda plans: an asynchronous id check's error names the op, the id and when") {
  IdCheckRecord record;
  record.op = static_cast<int32_t>(IdCheckOp::kGather);
  record.position = 2;
  record.id = 7;
  record.limit = 5;
  record.axis = 1;
  const std::string gather = bad_id_message(record, 0);
  CHECK(contains(gather,
                 "gather: index 7 at position 2 of the indices is outside [0, 5) for "
                 "axis 1"));
  CHECK(contains(gather,
                 "found on /gpu:0 by the op's asynchronous id check and reported at this "
                 "synchronisation point"));
  CHECK(contains(gather, "check the ids"));
  record.op = static_cast<int32_t>(IdCheckOp::kSparseCrossEntropy);
  record.id = -1;
  record.position = 0;
  record.limit = 10;
  const std::string loss = bad_id_message(record, 3);
  CHECK(contains(loss,
                 "sparse_softmax_cross_entropy_with_logits: label -1 at index 0 is "
                 "outside [0, 10): the logits have 10 classes (found on /gpu:3"));
}
