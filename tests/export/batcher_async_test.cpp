// Batcher::run_async, the batcher of gRPC's callback API: requests that do not wait still batch
// together (with each other and with run()'s), each completion is called once with its own rows
// or the batch's error, and what run() refuses reaches the completion instead.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "export/batcher.h"
#include "ops/ops.h"

namespace {

using est::Tensor;
using est::serving::Batcher;
using est::serving::NamedTensors;
namespace ops = est::ops;

NamedTensors rows_of(float value, int64_t rows = 1) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i) values.insert(values.end(), {value, value * 10});
  return {{"x", Tensor::from_vector(values, {rows, 2})}};
}

// run_async's completions as futures (the outputs, or the error rethrown by get()).
struct Answers {
  std::vector<std::promise<NamedTensors>> promises;
  std::atomic<int> calls{0};
  explicit Answers(size_t n) : promises(n) {}
  Batcher::DoneFn done(size_t i) {
    return [this, i](NamedTensors outputs, std::exception_ptr error) {
      ++calls;
      if (error)
        promises[i].set_exception(error);
      else
        promises[i].set_value(std::move(outputs));
    };
  }
  // Waits at most 60 s for answer i.
  NamedTensors get(size_t i) {
    auto future = promises[i].get_future();
    REQUIRE(future.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    return future.get();
  }
};

NamedTensors plus_one(const NamedTensors& inputs) { return {{"y", ops::add(inputs.at("x"), 1.0)}}; }

}  // namespace

TEST_CASE("Batcher::run_async: requests that do not wait run as one batch, each its own rows") {
  Batcher batcher({.max_batch_size = 4, .batch_timeout = std::chrono::seconds(30)});
  std::atomic<int> batches{0};
  auto fn = [&](const NamedTensors& inputs) {
    ++batches;
    CHECK(inputs.at("x").dim(0) == 4);
    return plus_one(inputs);
  };
  Answers answers(4);
  // One thread issues all four: run_async returns without waiting for the batch to fill.
  for (size_t i = 0; i < 4; ++i)
    batcher.run_async("key", rows_of(static_cast<float>(i)), fn, answers.done(i));
  for (size_t i = 0; i < 4; ++i)
    CHECK(answers.get(i).at("y").to_vector<float>() == std::vector<float>{i + 1.0f, i * 10 + 1.0f});
  CHECK(answers.calls == 4);
  CHECK(batches == 1);
  CHECK(batcher.batches_run() == 1);
}

TEST_CASE("Batcher::run_async: a batch mixes run() and run_async() requests") {
  Batcher batcher({.max_batch_size = 2, .batch_timeout = std::chrono::seconds(30)});
  Answers answers(1);
  // The first request starts a batch (a thread of the batcher's waits for it); run() fills it.
  batcher.run_async("key", rows_of(1), plus_one, answers.done(0));
  CHECK(batcher.run("key", rows_of(2), plus_one).at("y").to_vector<float>() ==
        std::vector<float>{3, 21});
  CHECK(answers.get(0).at("y").to_vector<float>() == std::vector<float>{2, 11});
  CHECK(batcher.batches_run() == 1);
}

TEST_CASE("Batcher::run_async: the batch's error, and run()'s refusals, reach the completion") {
  Batcher batcher({.max_batch_size = 2, .batch_timeout = std::chrono::seconds(30)});
  auto failing = [](const NamedTensors&) -> NamedTensors {
    throw est::InvalidArgumentError("bad batch");
  };
  Answers answers(4);
  batcher.run_async("key", rows_of(1), failing, answers.done(0));
  batcher.run_async("key", rows_of(2), failing, answers.done(1));
  CHECK_THROWS_WITH_AS(answers.get(0), "bad batch", est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(answers.get(1), "bad batch", est::InvalidArgumentError);
  // More rows than a batch: TF's message, as run() throws it.
  batcher.run_async("key", rows_of(1, 3), plus_one, answers.done(2));
  CHECK_THROWS_WITH_AS(answers.get(2), "Task size 3 is larger than maximum input batch size 2",
                       est::InvalidArgumentError);
  // A full request runs alone, on a thread of the batcher's.
  batcher.run_async("key", rows_of(5, 2), plus_one, answers.done(3));
  CHECK(answers.get(3).at("y").to_vector<float>() == std::vector<float>{6, 51, 6, 51});
  CHECK(answers.calls == 4);
}

TEST_CASE("Batcher::run_async: max_enqueued_batches refuses a request that starts one too many") {
  Batcher batcher({.max_batch_size = 4,
                   .batch_timeout = std::chrono::seconds(30),
                   .max_enqueued_batches = 1,
                   .num_batch_threads = 1});
  // A full request holds the only batch thread until `release`.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> running{false};
  auto blocking = [&](const NamedTensors& inputs) {
    running = true;
    released.wait();
    return plus_one(inputs);
  };
  auto full =
      std::async(std::launch::async, [&] { return batcher.run("a", rows_of(0, 4), blocking); });
  for (int i = 0; i < 6000 && !running; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(running);
  // A batch of 1 + 3 rows forms and waits for the thread: the one batch "a" may have enqueued.
  Answers answers(3);
  batcher.run_async("a", rows_of(1), plus_one, answers.done(0));
  batcher.run_async("a", rows_of(2, 3), plus_one, answers.done(1));
  // The next request would start another: refused with TF's message.
  batcher.run_async("a", rows_of(3), plus_one, answers.done(2));
  CHECK_THROWS_AS(answers.get(2), est::UnavailableError);
  release.set_value();
  CHECK(full.get().at("y").dim(0) == 4);
  CHECK(answers.get(0).at("y").to_vector<float>() == std::vector<float>{2, 11});
  CHECK(answers.get(1).at("y").dim(0) == 3);
  CHECK(answers.calls == 3);
}
