// The Batcher under TF Serving's BatchingParameters beyond max_batch_size and the timeout:
// allowed_batch_sizes pads a batch (the padding's outputs dropped), num_batch_threads bounds
// the batches running at once, max_enqueued_batches refuses a request once that many batches
// wait, pad_variable_length_inputs batches rows of other lengths, and options TF Serving
// refuses are refused naming the field. Each batch is counted in
// TF Serving's batching_session metrics. Waits are bounded.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "export/batcher.h"
#include "export/serving_metrics.h"
#include "ops/ops.h"

namespace {

using est::Tensor;
using est::serving::Batcher;
using est::serving::NamedTensors;
namespace ops = est::ops;

NamedTensors rows(std::vector<float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return {{"x", Tensor::from_vector(std::move(values), {n, 1})}};
}

// Waits (at most 10 s) until `done()`.
template <class Done>
bool eventually(Done done) {
  for (int i = 0; i < 1000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

}  // namespace

TEST_CASE("Batcher: allowed_batch_sizes pads a batch with its first row; answers keep theirs") {
  Batcher batcher({.max_batch_size = 4,
                   .batch_timeout = std::chrono::microseconds(0),
                   .allowed_batch_sizes = {2, 4}});
  std::vector<std::vector<float>> seen;
  auto fn = [&](const NamedTensors& inputs) {
    seen.push_back(inputs.at("x").to_vector<float>());
    return NamedTensors{{"y", ops::mul(inputs.at("x"), 2.0)}};
  };
  est::serving::metrics::Registry& metrics = est::serving::serving_metrics();
  const int64_t runs = metrics.value("/tensorflow/serving/batching_session/wrapped_run_count", {});
  const int64_t padded_to_4 =
      metrics.value("/tensorflow/serving/batching_session/padding_size", {"4"});
  NamedTensors answer = batcher.run("key", rows({3}), fn);
  CHECK(answer.at("y").to_vector<float>() == std::vector<float>{6});
  answer = batcher.run("key", rows({1, 2, 5}), fn);
  CHECK(answer.at("y").to_vector<float>() == std::vector<float>{2, 4, 10});
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<float>{3, 3});
  CHECK(seen[1] == std::vector<float>{1, 2, 5, 1});
  CHECK(metrics.value("/tensorflow/serving/batching_session/wrapped_run_count", {}) == runs + 2);
  CHECK(metrics.value("/tensorflow/serving/batching_session/padding_size", {"4"}) ==
        padded_to_4 + 1);
}

TEST_CASE("Batcher: BatchingParameters TF Serving refuses are refused, naming the field") {
  auto refused = [](Batcher::Options options, const std::string& field) {
    try {
      Batcher batcher(std::move(options));
      FAIL("accepted: " << field);
    } catch (const est::InvalidArgumentError& error) {
      CHECK(std::string(error.what()).find(field) != std::string::npos);
    }
  };
  refused({.max_batch_size = 0}, "max_batch_size");
  refused({.max_batch_size = 8, .allowed_batch_sizes = {4, 2, 8}}, "allowed_batch_sizes");
  refused({.max_batch_size = 8, .allowed_batch_sizes = {2, 4}}, "allowed_batch_sizes");
}

TEST_CASE("Batcher: num_batch_threads bounds the batches running at once, whatever their key") {
  Batcher batcher(
      {.max_batch_size = 4, .batch_timeout = std::chrono::microseconds(0), .num_batch_threads = 1});
  std::atomic<int> running{0}, most{0};
  auto fn = [&](const NamedTensors& inputs) {
    const int now = ++running;
    for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    --running;
    return inputs;
  };
  std::vector<std::future<NamedTensors>> answers;
  for (int i = 0; i < 3; ++i)
    answers.push_back(std::async(std::launch::async, [&batcher, &fn, i] {
      return batcher.run("key" + std::to_string(i), rows({static_cast<float>(i)}), fn);
    }));
  for (int i = 0; i < 3; ++i)
    CHECK(answers[static_cast<size_t>(i)].get().at("x").to_vector<float>() ==
          std::vector<float>{static_cast<float>(i)});
  CHECK(most == 1);
}

TEST_CASE("Batcher: past max_enqueued_batches waiting batches, a request is UNAVAILABLE") {
  Batcher batcher({.max_batch_size = 2,
                   .batch_timeout = std::chrono::microseconds(0),
                   .max_enqueued_batches = 1,
                   .num_batch_threads = 1});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  auto fn = [&](const NamedTensors& inputs) {
    ++started;
    released.wait_for(std::chrono::seconds(30));
    return inputs;
  };
  auto first = std::async(std::launch::async, [&] { return batcher.run("key", rows({1}), fn); });
  REQUIRE(eventually([&] { return started == 1; }));  // running on the one thread
  auto second = std::async(std::launch::async, [&] { return batcher.run("key", rows({2}), fn); });
  REQUIRE(eventually([&] { return batcher.batches_enqueued() == 1; }));  // waits for the thread
  CHECK_THROWS_AS(batcher.run("key", rows({3}), fn), est::UnavailableError);
  release.set_value();
  CHECK(first.get().at("x").to_vector<float>() == std::vector<float>{1});
  CHECK(second.get().at("x").to_vector<float>() == std::vector<float>{2});
}

TEST_CASE("Batcher: pad_variable_length_inputs batches rows of other lengths, padded as TF's") {
  Batcher padding({.max_batch_size = 2,
                   .batch_timeout = std::chrono::seconds(30),
                   .pad_variable_length_inputs = true});
  const NamedTensors shorter{{"x", Tensor::from_vector(std::vector<float>{1, 2}, {1, 2})}};
  const NamedTensors longer{{"x", Tensor::from_vector(std::vector<float>{5, 6, 7}, {1, 3})}};
  CHECK(padding.rows_key(shorter) == padding.rows_key(longer));
  CHECK(Batcher({}).rows_key(shorter) != Batcher({}).rows_key(longer));
  std::atomic<int> calls{0};
  auto fn = [&](const NamedTensors& inputs) {
    ++calls;
    return NamedTensors{{"y", ops::mul(inputs.at("x"), 2.0)}};
  };
  auto first = std::async(std::launch::async,
                          [&] { return padding.run(padding.rows_key(shorter), shorter, fn); });
  auto second = std::async(std::launch::async,
                           [&] { return padding.run(padding.rows_key(longer), longer, fn); });
  const Tensor a = first.get().at("y"), b = second.get().at("y");
  CHECK(calls == 1);
  CHECK(a.shape() == est::Shape{1, 3});  // padded with its first element, 1
  CHECK(a.to_vector<float>() == std::vector<float>{2, 4, 2});
  CHECK(b.to_vector<float>() == std::vector<float>{10, 12, 14});
}
