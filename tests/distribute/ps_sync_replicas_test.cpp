// The bookkeeping of synchronous parameter-server training (distribute/ps/sync_replicas.h),
// checked against TF1's SyncReplicasOptimizer and ConditionalAccumulator as documented: a
// gradient older than the accumulator's step is dropped, one of a later step waits for its step
// (where ps 0's tokens count it), replicas_to_aggregate gradients are averaged, each completed
// step releases max(total_num_replicas, replicas_to_aggregate) tokens holding the new global
// step, num_tokens tokens are there at the start (replicas_to_aggregate by default), too few
// tokens for the first step is an error, and row-sparse gradients are averaged row by row as
// TF's SparseConditionalAccumulator averages them.
#include <doctest/doctest.h>

#include "distribute/ps/sync_replicas.h"
#include "ops/error.h"
#include "ops/indexed_slices.h"

namespace est::distribute {
namespace {

NamedTensor grad(const std::string& name, std::vector<float> values) {
  return {name, ops::Tensor::from_vector<float>(values)};
}

std::map<std::string, std::vector<float>> by_name(const std::vector<NamedTensor>& tensors) {
  std::map<std::string, std::vector<float>> result;
  for (const NamedTensor& t : tensors) result[t.name] = t.value.to_vector<float>();
  return result;
}

NamedTensor rows(const std::string& name, std::vector<int64_t> indices, std::vector<float> values) {
  int64_t n = static_cast<int64_t>(indices.size());
  return {name,
          {},
          ops::make_indexed_slices(ops::Tensor::from_vector(indices),
                                   ops::Tensor::from_vector(values, {n, 2}), {6, 2})};
}

}  // namespace

TEST_CASE("sync replicas: the accumulator averages replicas_to_aggregate fresh gradients") {
  GradientAccumulator accumulator(2, 5);
  CHECK(accumulator.apply_grad(5, {grad("w", {1, 2}), grad("b", {4})}));
  CHECK_FALSE(accumulator.ready());
  // Computed at step 4, before step 5's values: stale, dropped, not counted.
  CHECK_FALSE(accumulator.apply_grad(4, {grad("w", {100, 100}), grad("b", {100})}));
  CHECK(accumulator.count() == 1);
  CHECK(accumulator.stale_dropped() == 1);
  CHECK_FALSE(accumulator.ready());
  CHECK_THROWS_AS(accumulator.take_grad(), InvalidArgumentError);
  CHECK(accumulator.apply_grad(5, {grad("w", {3, -2})}));  // no gradient for "b" this time
  REQUIRE(accumulator.ready());
  auto means = by_name(accumulator.take_grad());
  CHECK(means.at("w") == std::vector<float>{2, 0});
  CHECK(means.at("b") == std::vector<float>{4});  // the mean of the one it received
  CHECK(accumulator.step() == 6);
  CHECK(accumulator.count() == 0);
  CHECK(accumulator.steps_taken() == 1);
  // Step 5's gradients are stale now; an empty push counts as one replica's arrival.
  CHECK_FALSE(accumulator.apply_grad(5, {grad("w", {1, 1})}));
  CHECK(accumulator.apply_grad(6, {}));
  CHECK(accumulator.apply_grad(6, {grad("w", {1, 3})}));
  CHECK(by_name(accumulator.take_grad()).at("w") == std::vector<float>{1, 3});
  CHECK(accumulator.step() == 7);
}

TEST_CASE(
    "sync replicas: a push of a later step waits for it on each ps task, as ps 0's tokens count "
    "it") {
  // Two of three replicas; ps 0 counts each arrival for its own step only (SyncTokenQueue).
  // Step 0 completes on ps 0 with worker 0's and the chief's pushes, and worker 1, with a token
  // of step 1, pushes step 1; on ps 1 that push comes before the chief's push of step 0.
  SyncTokenQueue ps0({.replicas_to_aggregate = 2, .total_num_replicas = 3, .num_tokens = 0}, 0);
  GradientAccumulator ps1(2, 0);
  CHECK_FALSE(ps0.arrive(0, "worker 0"));
  CHECK(ps0.arrive(0, "chief 0"));
  CHECK(ps1.apply_grad(0, {grad("w", {1, 1})}));      // worker 0, step 0
  CHECK(ps1.apply_grad(1, {grad("w", {100, 100})}));  // worker 1, step 1: held for step 1
  CHECK(ps1.count() == 1);
  CHECK_FALSE(ps1.ready());
  CHECK(ps1.apply_grad(0, {grad("w", {3, 3})}));  // the chief's, fresh: step 0's group
  REQUIRE(ps1.ready());
  CHECK(by_name(ps1.take_grad()).at("w") == std::vector<float>{2, 2});
  CHECK(ps1.step() == 1);
  CHECK(ps1.count() == 1);  // worker 1's push now counts for its step
  CHECK(ps1.stale_dropped() == 0);
  // Worker 0 has finished; worker 1 and the chief complete step 1 on ps 0, and so on ps 1 (had
  // worker 1's push counted for step 0, ps 1 would wait for a second push of step 1 forever).
  CHECK_FALSE(ps0.arrive(1, "worker 1"));
  CHECK(ps0.arrive(1, "chief 0"));
  CHECK(ps1.apply_grad(1, {grad("w", {-96, 0})}));
  REQUIRE(ps1.ready());
  CHECK(by_name(ps1.take_grad()).at("w") == std::vector<float>{2, 50});
  CHECK(ps1.step() == ps0.global_step());

  // Pushes held two steps ahead stay held through the step between; a whole group held for the
  // next step makes the accumulator ready again as soon as it gets there.
  GradientAccumulator ahead(2, 5);
  CHECK(ahead.apply_grad(7, {grad("w", {1, 1})}));
  CHECK(ahead.apply_grad(6, {grad("w", {2, 2})}));
  CHECK(ahead.apply_grad(6, {grad("w", {4, 4})}));
  CHECK(ahead.apply_grad(5, {grad("w", {0, 0})}));
  CHECK(ahead.apply_grad(5, {}));
  CHECK(by_name(ahead.take_grad()).at("w") == std::vector<float>{0, 0});
  REQUIRE(ahead.ready());
  CHECK(by_name(ahead.take_grad()).at("w") == std::vector<float>{3, 3});
  CHECK(ahead.step() == 7);
  CHECK(ahead.count() == 1);
  // A held push of another shape than the name's is refused when it comes, not when it counts.
  CHECK_THROWS_AS(ahead.apply_grad(9, {grad("w", {1, 2, 3})}), InvalidArgumentError);
}

TEST_CASE("sync replicas: a gradient of another shape than the accumulated ones is refused") {
  GradientAccumulator accumulator(2, 0);
  accumulator.apply_grad(0, {grad("w", {1, 2}), grad("b", {1})});
  CHECK_THROWS_WITH_AS(accumulator.apply_grad(0, {grad("b", {5}), grad("w", {1, 2, 3})}),
                       doctest::Contains("'w'"), InvalidArgumentError);
  CHECK(accumulator.count() == 1);  // the refused push left nothing behind, "b" included
  accumulator.apply_grad(0, {grad("w", {3, 4}), grad("b", {3})});
  auto means = by_name(accumulator.take_grad());
  CHECK(means.at("w") == std::vector<float>{2, 3});
  CHECK(means.at("b") == std::vector<float>{2});
}

TEST_CASE("sync replicas: row-sparse gradients stay rows, each row averaged over its pushes") {
  // TF's SparseConditionalAccumulator (sparse_conditional_accumulator.h, "average element-wise"):
  // a row's sum is divided by the number of gradients that carried it, not by all of them.
  GradientAccumulator accumulator(2, 0);
  CHECK(accumulator.apply_grad(0, {rows("table", {3, 1, 3}, {1, 2, 4, 4, 1, 0})}));
  CHECK(accumulator.apply_grad(0, {rows("table", {5, 3}, {6, 6, 4, 0})}));
  std::vector<NamedTensor> means = accumulator.take_grad();
  REQUIRE(means.size() == 1);
  REQUIRE(means[0].rows.defined());
  CHECK_FALSE(means[0].value.defined());
  CHECK(means[0].rows.dense_shape == ops::Shape{6, 2});
  CHECK(means[0].rows.indices.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 5});
  // Row 3: (1 + 1 + 4) / 2, (2 + 0 + 0) / 2; rows 1 and 5 came once.
  CHECK(means[0].rows.values.to_vector<float>() == std::vector<float>{3, 1, 4, 4, 6, 6});

  // One replica's rows alone are its rows, repeats summed.
  GradientAccumulator one(1, 0);
  one.apply_grad(0, {rows("table", {2, 2}, {1, 1, 2, 2})});
  std::vector<NamedTensor> single = one.take_grad();
  CHECK(single[0].rows.indices.to_vector<int64_t>() == std::vector<int64_t>{2});
  CHECK(single[0].rows.values.to_vector<float>() == std::vector<float>{3, 3});

  // Rows from one push and a dense gradient from another: summed densely over both pushes.
  GradientAccumulator mixed(2, 0);
  mixed.apply_grad(0, {rows("table", {1}, {2, 4})});
  mixed.apply_grad(
      0, {{"table", ops::Tensor::from_vector<float>(std::vector<float>(12, 2.0f), {6, 2}), {}}});
  std::vector<NamedTensor> dense = mixed.take_grad();
  REQUIRE(dense[0].value.defined());
  CHECK(dense[0].value.to_vector<float>() ==
        std::vector<float>{1, 1, 2, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  // A push of other dense shape than the rows accumulated so far is refused, naming the table.
  GradientAccumulator refused(2, 0);
  refused.apply_grad(0, {rows("table", {1}, {2, 4})});
  CHECK_THROWS_WITH_AS(refused.apply_grad(0, {grad("table", {1, 2})}), doctest::Contains("'table'"),
                       InvalidArgumentError);
}

TEST_CASE("sync replicas: a step completes when replicas_to_aggregate workers arrive with it") {
  // Two of three replicas are aggregated; no tokens to start with.
  SyncTokenQueue queue({.replicas_to_aggregate = 2, .total_num_replicas = 3, .num_tokens = 0}, 10);
  CHECK_FALSE(queue.take().has_value());
  CHECK_FALSE(queue.arrive(10, "chief 0"));
  CHECK(queue.arrived() == std::vector<std::string>{"chief 0"});
  CHECK(queue.arrive(10, "worker 1"));
  CHECK(queue.global_step() == 11);
  CHECK(queue.arrived().empty());
  // The backup replica's push of step 10 comes too late: it changes nothing, but its worker
  // takes one of the three tokens like the others.
  CHECK_FALSE(queue.arrive(10, "worker 0"));
  CHECK(queue.global_step() == 11);
  for (int i = 0; i < 3; ++i) CHECK(queue.take() == 11);
  CHECK_FALSE(queue.take().has_value());
}

TEST_CASE("sync replicas: TensorFlow's initial tokens and tokens per step") {
  SUBCASE("num_tokens = -1 gives replicas_to_aggregate tokens holding the first step") {
    SyncTokenQueue queue({.replicas_to_aggregate = 3, .total_num_replicas = 2}, 0);
    for (int i = 0; i < 3; ++i) CHECK(queue.take() == 0);
    CHECK_FALSE(queue.take().has_value());
    // Fewer replicas than replicas_to_aggregate: each step releases 3 tokens, not 2.
    queue.arrive(0, "worker 0");
    queue.arrive(0, "worker 1");
    CHECK(queue.arrive(0, "worker 0"));
    for (int i = 0; i < 3; ++i) CHECK(queue.take() == 1);
    CHECK_FALSE(queue.take().has_value());
  }
  SUBCASE("total_num_replicas defaults to replicas_to_aggregate") {
    SyncReplicasOptions options{.replicas_to_aggregate = 4};
    CHECK(options.resolved_total_num_replicas() == 4);
    CHECK(options.resolved_num_tokens() == 4);
    CHECK(options.tokens_per_step() == 4);
  }
  SUBCASE("the settings travel to the ps tasks unchanged") {
    SyncReplicasOptions options{.replicas_to_aggregate = 3,
                                .total_num_replicas = 5,
                                .num_tokens = 0,
                                .token_timeout = std::chrono::milliseconds(1234)};
    SyncReplicasOptions back = SyncReplicasOptions::from_tensor(options.to_tensor(), "chief 0");
    CHECK(back.replicas_to_aggregate == 3);
    CHECK(back.resolved_total_num_replicas() == 5);
    CHECK(back.resolved_num_tokens() == 0);
    CHECK(back.token_timeout.count() == 1234);
    CHECK_THROWS_AS(SyncReplicasOptions::from_tensor(grad("sync_replicas", {1, 2, 3, 4}), "x"),
                    DataLossError);
  }
}

TEST_CASE("sync replicas: waiters take tokens in the order they came, as a FIFO queue serves") {
  // Lock-step (num_tokens = 0), two replicas. The chief waits for step 0's token; worker 0
  // completes the step, then (faster than the chief's thread wakes) completes its part of step
  // 1 and asks again: it must not take the token the chief is waiting for.
  SyncTokenQueue queue({.replicas_to_aggregate = 2, .num_tokens = 0}, 0);
  CHECK_FALSE(queue.arrive(0, "chief 0"));
  uint64_t chief = queue.wait();
  CHECK_FALSE(queue.take(chief).has_value());  // no token yet
  CHECK(queue.arrive(0, "worker 0"));          // step 0 complete: 2 tokens holding step 1
  uint64_t worker = queue.wait();
  CHECK_FALSE(queue.take(worker).has_value());  // the chief came first
  CHECK(queue.take(chief) == 1);
  queue.leave(chief);
  CHECK(queue.take(worker) == 1);
  queue.leave(worker);
  // Worker 0 again, at step 1, while the chief has not pushed step 1: nothing to take.
  CHECK_FALSE(queue.arrive(1, "worker 0"));
  worker = queue.wait();
  CHECK_FALSE(queue.take(worker).has_value());
  // A waiter that leaves without a token (its wait timed out) lets the next one take its turn.
  uint64_t late = queue.wait();
  queue.leave(worker);
  CHECK(queue.arrive(1, "chief 0"));
  CHECK(queue.take(late) == 2);
  queue.leave(late);
  // A chief that configures again restarts the queue; waiters keep their places.
  uint64_t first = queue.wait(), second = queue.wait();
  queue.restart({.replicas_to_aggregate = 2, .num_tokens = 2}, 7);
  CHECK(queue.global_step() == 7);
  CHECK_FALSE(queue.take(second).has_value());
  CHECK(queue.take(first) == 7);
  queue.leave(first);
  CHECK(queue.take(second) == 7);
}

TEST_CASE("sync replicas: settings that cannot train are refused, naming the field") {
  CHECK_THROWS_WITH_AS((SyncReplicasOptions{.replicas_to_aggregate = 0}.validate()),
                       doctest::Contains("replicas_to_aggregate"), InvalidArgumentError);
  // Three gradients per step from two replicas need at least one token to start with.
  CHECK_THROWS_WITH_AS(
      (SyncReplicasOptions{.replicas_to_aggregate = 3, .total_num_replicas = 2, .num_tokens = 0}
           .validate()),
      doctest::Contains("too few tokens"), InvalidArgumentError);
  CHECK_NOTHROW(
      (SyncReplicasOptions{.replicas_to_aggregate = 3, .total_num_replicas = 2, .num_tokens = 1}
           .validate()));
  CHECK_THROWS_WITH_AS(
      (SyncReplicasOptions{.replicas_to_aggregate = 2, .token_timeout = std::chrono::seconds(0)}
           .validate()),
      doctest::Contains("token_timeout"), InvalidArgumentError);
}

}  // namespace est::distribute
