// PsPlacement (distribute/ps/ps_placement.h): TF1's replica_device_setter round-robin over ps
// tasks in creation order, GreedyLoadBalancingStrategy with byte_size_load_fn, and the axis-0
// partitioners with variable_scope's slicing (the first rows % parts parts one row longer).
#include <doctest/doctest.h>

#include "distribute/ps/ps_placement.h"
#include "ops/error.h"

using namespace est;
using namespace est::distribute;

namespace {

std::vector<int> owners(const PsVariable& v) {
  std::vector<int> ps;
  for (const PsShard& s : v.shards) ps.push_back(s.ps);
  return ps;
}

}  // namespace

TEST_CASE("ps placement: round-robin in creation order, global_step first on ps 0") {
  PsPlacement placement(2);
  CHECK(placement.place("global_step", {}, ops::DType::kI64).shards[0].ps == 0);
  CHECK(placement.place("dense/kernel", {784, 10}, ops::DType::kF32).shards[0].ps == 1);
  CHECK(placement.place("dense/bias", {10}, ops::DType::kF32).shards[0].ps == 0);
  CHECK(placement.place("dense_1/kernel", {10, 10}, ops::DType::kF32).shards[0].ps == 1);
  // Asking again returns the same place; a different shape is an error naming the variable.
  CHECK(placement.place("dense/bias", {10}, ops::DType::kF32).shards[0].ps == 0);
  CHECK_THROWS_WITH_AS(placement.place("dense/bias", {11}, ops::DType::kF32),
                       doctest::Contains("dense/bias"), InvalidArgumentError);
  CHECK(placement.variables().size() == 4);
  CHECK_THROWS_AS(PsPlacement(0), InvalidArgumentError);
}

TEST_CASE("ps placement: global_step stays on ps 0 when created later") {
  PsPlacement placement(3);
  CHECK(placement.place("a", {4}, ops::DType::kF32).shards[0].ps == 0);
  CHECK(placement.place("global_step", {}, ops::DType::kI64).shards[0].ps == 0);
  CHECK(placement.place("b", {4}, ops::DType::kF32).shards[0].ps == 2);  // the counter moved on
}

TEST_CASE("ps placement: GreedyLoadBalancing puts each variable on the least loaded task") {
  PsPlacement placement(2, PsLoadBalancing::kGreedyByteSize);
  placement.place("global_step", {}, ops::DType::kI64);                       // ps 0: 8 bytes
  CHECK(placement.place("big", {1000}, ops::DType::kF32).shards[0].ps == 1);  // ps 1: 4000
  CHECK(placement.place("small", {10}, ops::DType::kF32).shards[0].ps == 0);  // ps 0: 48
  CHECK(placement.place("mid", {500}, ops::DType::kF32).shards[0].ps == 0);   // ps 0: 2048
  CHECK(placement.place("x", {10}, ops::DType::kF64).shards[0].ps == 0);      // 2048 < 4000
  CHECK(placement.loads() == std::vector<int64_t>{2128, 4000});
}

TEST_CASE("ps placement: fixed_size_partitioner cuts axis 0, parts placed like variables") {
  PsPlacement placement(2, PsLoadBalancing::kRoundRobin, fixed_size_partitioner(3));
  placement.place("global_step", {}, ops::DType::kI64);
  const PsVariable& emb = placement.place("emb", {10, 4}, ops::DType::kF32);
  REQUIRE(emb.shards.size() == 3);
  CHECK(emb.shards[0].name == "emb/part_0");
  CHECK(emb.shards[2].name == "emb/part_2");
  CHECK(emb.shards[0].row_begin == 0);
  CHECK(emb.shards[0].row_end == 4);  // 10 = 4 + 3 + 3
  CHECK(emb.shards[1].row_end == 7);
  CHECK(emb.shards[2].row_end == 10);
  CHECK(owners(emb) == std::vector<int>{1, 0, 1});
  // No more parts than rows; scalars stay whole.
  CHECK(placement.place("bias", {2}, ops::DType::kF32).shards.size() == 2);
  CHECK(placement.place("scale", {}, ops::DType::kF32).shards.size() == 1);
  CHECK_THROWS_AS(fixed_size_partitioner(0), InvalidArgumentError);
  CHECK(describe(emb) ==
        "ps 1 holds emb/part_0 (rows 0-3), ps 0 holds emb/part_1 (rows 4-6), "
        "ps 1 holds emb/part_2 (rows 7-9)");
}

TEST_CASE("ps placement: min_max_variable_partitioner keeps parts at least min_slice_size") {
  // [1000, 100] float32: 400 bytes a row; 256 KiB holds 655 rows: 2 parts (of at most 4).
  Partitioner p = min_max_variable_partitioner(4);
  CHECK(p("w", {1000, 100}, ops::DType::kF32) == 2);
  // The default max_partitions=1 never cuts.
  CHECK(min_max_variable_partitioner()("w", {1000, 100}, ops::DType::kF32) == 1);
  // A row over min_slice_size: one row a part, as many as the rows allow (max 0: none).
  CHECK(min_max_variable_partitioner(0, 1024)("w", {7, 512}, ops::DType::kF32) == 7);
  // Strings count bytes_per_string_element each.
  CHECK(min_max_variable_partitioner(100, 160, 16)("s", {100}, ops::DType::kString) == 10);
  CHECK_THROWS_AS(min_max_variable_partitioner(-1), InvalidArgumentError);
}
