// The Batcher: concurrent requests become one batch whose outputs are split back per request;
// answers equal unbatched ones; a model that mixes rows is run per request; errors reach all.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <vector>

#include "export/batcher.h"
#include "ops/ops.h"

namespace {

using est::Tensor;
using est::serving::Batcher;
using est::serving::NamedTensors;
namespace ops = est::ops;

NamedTensors one_row(float value) {
  return {{"x", Tensor::from_vector(std::vector<float>{value, value * 10}, {1, 2})}};
}

// Four requests, a batch of four: with a timeout far beyond the test, the batch runs when full.
template <class Fn>
std::vector<std::future<NamedTensors>> four_requests(Batcher& batcher, Fn fn) {
  std::vector<std::future<NamedTensors>> answers;
  for (int i = 0; i < 4; ++i)
    answers.push_back(std::async(std::launch::async, [&batcher, fn, i] {
      return batcher.run("key", one_row(static_cast<float>(i)), fn);
    }));
  return answers;
}

}  // namespace

TEST_CASE("Batcher: concurrent requests run as one batch, each gets its own rows") {
  Batcher batcher({.max_batch_size = 4, .batch_timeout = std::chrono::seconds(30)});
  std::atomic<int> calls{0};
  std::atomic<int64_t> rows_seen{0};
  auto fn = [&](const NamedTensors& inputs) {
    ++calls;
    rows_seen = inputs.at("x").dim(0);
    return NamedTensors{{"y", ops::add(inputs.at("x"), 1.0)}};
  };
  auto answers = four_requests(batcher, fn);
  for (int i = 0; i < 4; ++i) {
    NamedTensors answer = answers[static_cast<size_t>(i)].get();
    CHECK(answer.at("y").shape() == est::Shape{1, 2});
    CHECK(answer.at("y").to_vector<float>() == std::vector<float>{i + 1.0f, i * 10 + 1.0f});
  }
  CHECK(calls == 1);
  CHECK(rows_seen == 4);
  CHECK(batcher.batches_run() == 1);
}

TEST_CASE("Batcher: a model whose outputs mix rows runs each request alone") {
  Batcher batcher({.max_batch_size = 4, .batch_timeout = std::chrono::seconds(30)});
  auto total = [](const NamedTensors& inputs) {
    return NamedTensors{{"sum", ops::sum(inputs.at("x"))}};  // a scalar: not per row
  };
  auto answers = four_requests(batcher, total);
  for (int i = 0; i < 4; ++i)
    CHECK(answers[static_cast<size_t>(i)].get().at("sum").item() == doctest::Approx(11.0 * i));
}

TEST_CASE("Batcher: an error reaches every request of the batch; a full request runs alone") {
  Batcher batcher({.max_batch_size = 4, .batch_timeout = std::chrono::seconds(30)});
  auto failing = [](const NamedTensors&) -> NamedTensors {
    throw est::InvalidArgumentError("bad batch");
  };
  auto answers = four_requests(batcher, failing);
  for (auto& answer : answers) CHECK_THROWS_AS(answer.get(), est::InvalidArgumentError);
  NamedTensors full{{"x", Tensor::zeros({4, 2})}};
  auto identity = [](const NamedTensors& inputs) { return inputs; };
  CHECK(batcher.run("key", full, identity).at("x").dim(0) == 4);
}

TEST_CASE("Batcher: string inputs and outputs (raw features, string classes) batch by rows") {
  Batcher batcher({.max_batch_size = 3, .batch_timeout = std::chrono::seconds(30)});
  std::atomic<int> calls{0};
  auto fn = [&](const NamedTensors& inputs) {
    ++calls;
    const std::vector<std::string> in = inputs.at("s").to_vector<std::string>();
    std::vector<std::string> out;
    for (const std::string& value : in) out.push_back(value + "!");
    return NamedTensors{{"t", Tensor::from_vector<std::string>(out, inputs.at("s").shape())}};
  };
  std::vector<std::future<NamedTensors>> answers;
  for (int i = 0; i < 3; ++i)
    answers.push_back(std::async(std::launch::async, [&batcher, fn, i] {
      const std::string a = std::to_string(i);
      return batcher.run("key",
                         {{"s", Tensor::from_vector<std::string>({a + "a", a + "b"}, {1, 2})}}, fn);
    }));
  for (int i = 0; i < 3; ++i) {
    const NamedTensors answer = answers[static_cast<size_t>(i)].get();
    const std::string a = std::to_string(i);
    CHECK(answer.at("t").shape() == est::Shape{1, 2});
    CHECK(answer.at("t").to_vector<std::string>() == std::vector<std::string>{a + "a!", a + "b!"});
  }
  CHECK(calls == 1);
}
