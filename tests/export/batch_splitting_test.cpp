// The Batcher's request sizes as TF Serving's batching (TF's shared_batch_scheduler.h,
// TF Serving's batching_session.cc SplitInputTask): a request larger than max_batch_size is
// refused with TF's message; with enable_large_batch_splitting a request larger than a batch's
// room is split, its first part filling the batch being gathered and the rest in batches of at
// most max_execution_batch_size, and its answer equals the unbatched one; a model whose outputs
// are not per row answers a split request whole. Waits are bounded.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// Rows 0, 1, ..., n - 1 of two columns: row r is {r, 10 r}.
NamedTensors numbered_rows(int64_t n, float first = 0) {
  std::vector<float> values;
  for (int64_t r = 0; r < n; ++r) {
    values.push_back(first + static_cast<float>(r));
    values.push_back(10 * (first + static_cast<float>(r)));
  }
  return {{"x", Tensor::from_vector(std::move(values), {n, 2})}};
}

// A per-row model that records the rows of every batch it runs.
struct RecordingModel {
  std::mutex mutex;
  std::vector<int64_t> batches;
  NamedTensors operator()(const NamedTensors& inputs) {
    {
      std::lock_guard lock(mutex);
      batches.push_back(inputs.at("x").dim(0));
    }
    return NamedTensors{{"y", ops::add(ops::mul(inputs.at("x"), 2.0), 1.0)},
                        {"first", ops::slice(inputs.at("x"), {0, 0}, {inputs.at("x").dim(0), 1})}};
  }
};

// Waits (at most 10 s) until `done()`.
template <class Done>
bool eventually(Done done) {
  for (int i = 0; i < 1000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

void check_equal(const NamedTensors& got, const NamedTensors& expected) {
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    CHECK(got.at(name).shape() == tensor.shape());
    CHECK(got.at(name).to_vector<float>() == tensor.to_vector<float>());
  }
}

}  // namespace

TEST_CASE("Batcher: a request larger than max_batch_size is refused with TF's message") {
  for (bool splitting : {false, true}) {
    Batcher batcher({.max_batch_size = 4,
                     .batch_timeout = std::chrono::seconds(30),
                     .enable_large_batch_splitting = splitting,
                     .max_execution_batch_size = splitting ? 2 : 0});
    RecordingModel model;
    auto fn = [&](const NamedTensors& inputs) { return model(inputs); };
    try {
      batcher.run("key", numbered_rows(5), fn);
      FAIL("a request of 5 rows was answered");
    } catch (const est::InvalidArgumentError& error) {
      CHECK(std::string(error.what()) == "Task size 5 is larger than maximum input batch size 4");
    }
    CHECK(model.batches.empty());
    // A request of max_batch_size rows is answered (alone, or split in two).
    RecordingModel unbatched;
    check_equal(batcher.run("key", numbered_rows(4), fn), unbatched(numbered_rows(4)));
    CHECK(model.batches == (splitting ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{4}));
  }
}

TEST_CASE("Batcher: with splitting, a large request runs in batches of max_execution_batch_size") {
  Batcher batcher({.max_batch_size = 8,
                   .batch_timeout = std::chrono::microseconds(0),
                   .enable_large_batch_splitting = true,
                   .max_execution_batch_size = 3});
  RecordingModel model, unbatched;
  auto fn = [&](const NamedTensors& inputs) { return model(inputs); };
  check_equal(batcher.run("key", numbered_rows(7), fn), unbatched(numbered_rows(7)));
  CHECK(model.batches == std::vector<int64_t>{3, 3, 1});
  // A request that fits a batch is not split.
  model.batches.clear();
  check_equal(batcher.run("key", numbered_rows(3), fn), unbatched(numbered_rows(3)));
  CHECK(model.batches == std::vector<int64_t>{3});
}

TEST_CASE("Batcher: a split request's first part fills the batch being gathered") {
  Batcher batcher({.max_batch_size = 8,
                   .batch_timeout = std::chrono::seconds(30),
                   .enable_large_batch_splitting = true,
                   .max_execution_batch_size = 3});
  RecordingModel model, unbatched;
  auto fn = [&](const NamedTensors& inputs) { return model(inputs); };
  // Two rows wait for a third (the timeout is far beyond the test).
  auto waiting =
      std::async(std::launch::async, [&] { return batcher.run("key", numbered_rows(2), fn); });
  REQUIRE(eventually([&] { return batcher.batches_enqueued() == 1; }));
  // Four rows: one completes the waiting batch, three run as a full batch of their own.
  check_equal(batcher.run("key", numbered_rows(4, 100), fn), unbatched(numbered_rows(4, 100)));
  check_equal(waiting.get(), unbatched(numbered_rows(2)));
  std::sort(model.batches.begin(), model.batches.end());
  CHECK(model.batches == std::vector<int64_t>{3, 3});
}

TEST_CASE("Batcher: a split request of a model that reduces over its batch is answered whole") {
  Batcher batcher({.max_batch_size = 8,
                   .batch_timeout = std::chrono::microseconds(0),
                   .enable_large_batch_splitting = true,
                   .max_execution_batch_size = 2});
  std::atomic<int> calls{0};
  auto total = [&](const NamedTensors& inputs) {
    ++calls;
    return NamedTensors{{"sum", ops::sum(inputs.at("x"))}};  // a scalar: not per row
  };
  // Rows 0..4: 0 + 1 + ... + 4 = 10, and ten times that.
  CHECK(batcher.run("key", numbered_rows(5), total).at("sum").item() == doctest::Approx(110.0));
  CHECK(calls == 4);  // three parts, then the whole request
}

TEST_CASE("Batcher: max_execution_batch_size TF refuses is refused, naming the field") {
  auto refused = [](Batcher::Options options, const std::string& words) {
    try {
      Batcher batcher(std::move(options));
      FAIL("accepted: " << words);
    } catch (const est::InvalidArgumentError& error) {
      CHECK(std::string(error.what()).find(words) != std::string::npos);
    }
  };
  refused(
      {.max_batch_size = 4, .enable_large_batch_splitting = true, .max_execution_batch_size = 8},
      "input_batch_size_limit must be greater than or equal to max_execution_batch_size");
  refused({.max_batch_size = 4, .max_execution_batch_size = -1}, "max_execution_batch_size");
}
