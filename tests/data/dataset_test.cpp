// Sources and transformations of data::Dataset, each against hand-computed expectations.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "data/dataset.h"
#include "ops/logging.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::iota;
using est::testing::values_of;

namespace {

int64_t value(const Element& e) { return static_cast<int64_t>(e.value.item()); }

Element plus(Element e, int64_t amount) {
  return Element(Tensor::scalar(static_cast<double>(value(e) + amount), DType::kI64));
}

// Elements whose value is an int64 vector [n] holding n, n, ..., n (length n).
Element run_of(int64_t n) {
  return Element(Tensor::full({n}, static_cast<double>(n), DType::kI64));
}

}  // namespace

TEST_CASE("range yields int64 scalars and ends with nullopt, repeatedly") {
  CHECK(values_of(Dataset::range(5)) == iota(0, 5));
  CHECK(values_of(Dataset::range(2, 11, 3)) == std::vector<int64_t>{2, 5, 8});
  CHECK(values_of(Dataset::range(5, 0, -2)) == std::vector<int64_t>{5, 3, 1});
  CHECK(values_of(Dataset::range(3, 3)).empty());
  auto it = Dataset::range(1).iterator();
  auto first = it.next();
  REQUIRE(first);
  CHECK(first->value.dtype() == DType::kI64);
  CHECK(first->value.rank() == 0);
  CHECK_FALSE(it.next());
  CHECK_FALSE(it.next());  // the end is sticky, not an exception
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(0, 5, 0); }), "step"));
}

TEST_CASE("from_tensor_slices slices tensors and feature maps along the first dimension") {
  Tensor matrix = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto rows = drain(Dataset::from_tensor_slices(matrix));
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].value.shape() == Shape{2});
  CHECK(rows[1].value.to_vector<float>() == std::vector<float>{3, 4});

  Features features{{"x", Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})},
                    {"id", Tensor::from_vector<int32_t>({7, 8})}};
  auto elements =
      drain(Dataset::from_tensor_slices(features, Tensor::from_vector<int64_t>({0, 1})));
  REQUIRE(elements.size() == 2);
  CHECK(elements[1].features.at("x").to_vector<float>() == std::vector<float>{3, 4});
  CHECK(elements[1].features.at("id").item() == 8);
  CHECK(elements[1].labels.item() == 1);
  CHECK_FALSE(elements[1].is_single());

  Features bad{{"x", Tensor::zeros({3, 2})}, {"y", Tensor::zeros({4})}};
  std::string message =
      error_message<InvalidArgumentError>([&] { drain(Dataset::from_tensor_slices(bad)); });
  CHECK(contains(message, "'x' has 3 rows"));
  CHECK(contains(message, "'y' has 4"));
  CHECK(contains(error_message<InvalidArgumentError>(
                     [] { drain(Dataset::from_tensor_slices(Tensor::scalar(1))); }),
                 "scalar"));
}

TEST_CASE("from_generator calls its factory once per pass; from_strings and from_tensors") {
  int factory_calls = 0;
  auto ds = Dataset::from_generator([&factory_calls] {
    ++factory_calls;
    return [i = int64_t{0}]() mutable -> std::optional<Element> {
      if (i == 3) return std::nullopt;
      return Element(Tensor::scalar(static_cast<double>(i++), DType::kI64));
    };
  });
  CHECK(values_of(ds.repeat(2)) == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
  CHECK(factory_calls == 2);

  auto strings = drain(Dataset::from_strings({"a.tfrecord", "", "bb"}));
  REQUIRE(strings.size() == 3);
  CHECK(tensor_bytes(strings[0].value) == "a.tfrecord");
  CHECK(strings[1].value.shape() == Shape{0});
  CHECK(tensor_bytes(strings[2].value) == "bb");

  CHECK(values_of(Dataset::from_tensors(Element(Tensor::from_vector<int64_t>({4, 5})))) ==
        std::vector<int64_t>{4, 5});
}

TEST_CASE("map, sequential and parallel, keeps the input order") {
  auto add = [](Element e) { return plus(std::move(e), 100); };
  CHECK(values_of(Dataset::range(6).map(add)) == iota(100, 106));
  // Later elements finish first; the output order must not change.
  auto slow_first = [](Element e) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (20 - value(e))));
    return plus(std::move(e), 1);
  };
  CHECK(values_of(Dataset::range(20).map(slow_first, 4)) == iota(1, 21));
  CHECK(values_of(Dataset::range(50).map(add, kAutotune)) == iota(100, 150));
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).map(nullptr); }),
                 "empty"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { Dataset::range(3).map(add, 0); }),
                 "num_parallel_calls"));
}

TEST_CASE("a failing map function surfaces from next() at its element, in order") {
  auto fail_at_3 = [](Element e) {
    if (value(e) == 3) throw InvalidArgumentError("bad element 3");
    return e;
  };
  for (int64_t parallel : {int64_t{1}, int64_t{3}}) {
    auto it = Dataset::range(6).map(fail_at_3, parallel).iterator();
    for (int64_t i = 0; i < 3; ++i) {
      auto e = it.next();
      REQUIRE(e);
      CHECK(value(*e) == i);
    }
    CHECK(error_message<InvalidArgumentError>([&] { it.next(); }) == "bad element 3");
    auto after = it.next();  // the pipeline goes on past a failed element
    REQUIRE(after);
    CHECK(value(*after) == 4);
  }
}

TEST_CASE("filter, take and skip") {
  auto even = [](const Element& e) { return value(e) % 2 == 0; };
  CHECK(values_of(Dataset::range(9).filter(even)) == std::vector<int64_t>{0, 2, 4, 6, 8});
  CHECK(values_of(Dataset::range(10).take(3)) == iota(0, 3));
  CHECK(values_of(Dataset::range(10).take(0)).empty());
  CHECK(values_of(Dataset::range(10).take(-1)) == iota(0, 10));
  CHECK(values_of(Dataset::range(10).take(20)) == iota(0, 10));
  CHECK(values_of(Dataset::range(10).skip(7)) == iota(7, 10));
  CHECK(values_of(Dataset::range(10).skip(-1)).empty());
  CHECK(values_of(Dataset::range(10).skip(12)).empty());
  CHECK(values_of(Dataset::range(10).skip(2).take(3)) == iota(2, 5));
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).take(-2); }), "take"));
}

TEST_CASE("shards are disjoint and together cover the data exactly once") {
  for (int64_t size : {0, 1, 7, 10, 31, 64}) {
    for (int64_t shards = 1; shards <= 13; ++shards) {
      std::vector<int64_t> all;
      for (int64_t index = 0; index < shards; ++index) {
        auto shard = values_of(Dataset::range(size).shard(shards, index));
        // Shard `index` holds exactly the elements i with i % shards == index, in order.
        std::vector<int64_t> expected;
        for (int64_t i = index; i < size; i += shards) expected.push_back(i);
        CHECK(shard == expected);
        all.insert(all.end(), shard.begin(), shard.end());
      }
      std::sort(all.begin(), all.end());
      CHECK(all == iota(0, size));
    }
  }
  // Sharding works the same over a source that cannot skip cheaply.
  auto filtered = Dataset::range(20).filter([](const Element&) { return true; });
  CHECK(values_of(filtered.shard(3, 2)) == std::vector<int64_t>{2, 5, 8, 11, 14, 17});
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).shard(2, 2); }),
                 "index 2 is outside [0, 2)"));
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).shard(0, 0); }),
                 "num_shards"));
}

TEST_CASE("repeat: counted, forever, and stopping on an empty input") {
  CHECK(values_of(Dataset::range(3).repeat(3)) == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2});
  CHECK(values_of(Dataset::range(3).repeat(0)).empty());
  CHECK(values_of(Dataset::range(2).repeat().take(5)) == std::vector<int64_t>{0, 1, 0, 1, 0});
  CHECK(values_of(Dataset::range(0).repeat()).empty());  // terminates
}

TEST_CASE("shuffle is a permutation, deterministic under a seed, reshuffled per epoch") {
  auto order = [](std::optional<uint64_t> seed, int64_t buffer, bool reshuffle = true) {
    return values_of(Dataset::range(50).shuffle(buffer, seed, reshuffle));
  };
  auto a = order(42, 50);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(0, 50));
  CHECK(a != iota(0, 50));
  CHECK(order(42, 50) == a);           // same seed, same order
  CHECK(order(43, 50) != a);           // another seed, another order
  CHECK(order(42, 1) == iota(0, 50));  // a buffer of one cannot reorder
  // A small buffer only moves elements forward by less than the buffer size... or anywhere back.
  auto local = order(7, 4);
  for (size_t i = 0; i < local.size(); ++i) CHECK(local[i] <= static_cast<int64_t>(i) + 3);

  auto epochs = values_of(Dataset::range(20).shuffle(20, 5).repeat(2));
  std::vector<int64_t> first(epochs.begin(), epochs.begin() + 20),
      second(epochs.begin() + 20, epochs.end());
  CHECK(first != second);
  std::sort(second.begin(), second.end());
  CHECK(second == iota(0, 20));
  CHECK(values_of(Dataset::range(20).shuffle(20, 5).repeat(2)) == epochs);
  auto same = values_of(Dataset::range(20).shuffle(20, 5, false).repeat(2));
  CHECK(std::equal(same.begin(), same.begin() + 20, same.begin() + 20));
  // Without a seed two iterators (almost surely) differ.
  CHECK(order(std::nullopt, 50) != order(std::nullopt, 50));
}

TEST_CASE("shuffle draws each element first about equally often") {
  std::vector<int> first_counts(10, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    auto it = Dataset::range(10).shuffle(10, seed).iterator();
    ++first_counts[static_cast<size_t>(value(*it.next()))];
  }
  // Expected 200 each; the binomial standard deviation is ~13.4, so 120..280 is ~6 sigma.
  for (int count : first_counts) {
    CHECK(count > 120);
    CHECK(count < 280);
  }
}

TEST_CASE("batch stacks components and keeps or drops the remainder") {
  auto batches = drain(Dataset::range(10).batch(4));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].value.shape() == Shape{4});
  CHECK(batches[2].value.to_vector<int64_t>() == std::vector<int64_t>{8, 9});
  CHECK(drain(Dataset::range(10).batch(4, true)).size() == 2);
  CHECK(drain(Dataset::range(0).batch(4)).empty());

  Features features{
      {"image", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 2, 2})}};
  auto batched = drain(
      Dataset::from_tensor_slices(features, Tensor::from_vector<int64_t>({5, 6, 7})).batch(2));
  REQUIRE(batched.size() == 2);
  CHECK(batched[0].features.at("image").shape() == Shape{2, 2, 2});
  CHECK(batched[0].features.at("image").to_vector<float>() ==
        std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(batched[0].labels.to_vector<int64_t>() == std::vector<int64_t>{5, 6});
  CHECK(batched[1].labels.shape() == Shape{1});

  auto ragged = Dataset::range(1, 4).map([](Element e) { return run_of(value(e)); });
  std::string message = error_message<InvalidArgumentError>([&] { drain(ragged.batch(3)); });
  CHECK(contains(message, "component 'value' of element 1 has shape [2]"));
  CHECK(contains(message, "padded_batch"));
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).batch(0); }),
                 "batch_size"));
}

TEST_CASE("padded_batch pads to the longest, or to given shapes, with given values") {
  auto runs = Dataset::range(1, 5).map([](Element e) { return run_of(value(e)); });
  auto batches = drain(runs.padded_batch(3));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].value.shape() == Shape{3, 3});
  CHECK(batches[0].value.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 2, 2, 0, 3, 3, 3});
  CHECK(batches[1].value.shape() == Shape{1, 4});

  auto fixed = drain(runs.padded_batch(2, {{"value", {5}}}, {{"value", -1}}));
  CHECK(fixed[0].value.to_vector<int64_t>() ==
        std::vector<int64_t>{1, -1, -1, -1, -1, 2, 2, -1, -1, -1});
  std::string message = error_message<InvalidArgumentError>([&] {
    drain(runs.padded_batch(4, {{"value", {3}}}));
  });
  CHECK(contains(message, "'value' has size 4"));

  // Two dimensions: [r, c] blocks land in the top-left corner.
  auto blocks = Dataset::range(1, 3).map([](Element e) {
    int64_t n = value(e);
    return Element(Features{{"m", Tensor::full({n, n}, static_cast<double>(n))}});
  });
  auto padded = drain(blocks.padded_batch(2));
  CHECK(padded[0].features.at("m").shape() == Shape{2, 2, 2});
  CHECK(padded[0].features.at("m").to_vector<float>() ==
        std::vector<float>{1, 0, 0, 0, 2, 2, 2, 2});
}

TEST_CASE("ragged_batch concatenates values and records row splits") {
  auto runs = Dataset::range(0, 4).map([](Element e) {
    return Element(Features{{"tokens", run_of(value(e)).value}, {"n", e.value}});
  });
  auto batches = drain(runs.ragged_batch(3, {"tokens"}));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].features.at("tokens").to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  CHECK(batches[0].features.at("tokens/row_splits").to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 1, 3});
  CHECK(batches[0].features.at("n").to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  CHECK(batches[1].features.at("tokens/row_splits").to_vector<int64_t>() ==
        std::vector<int64_t>{0, 3});
  CHECK(
      contains(error_message<InvalidArgumentError>([&] { drain(runs.ragged_batch(2, {"nope"})); }),
               "no feature 'nope'"));
}

TEST_CASE("cache() runs its input once and replays it for later epochs") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto counted = Dataset::range(5).map([calls](Element e) {
    ++*calls;
    return e;
  });
  auto cached = counted.cache();
  CHECK(values_of(cached.repeat(3)) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  CHECK(*calls == 5);
  CHECK(values_of(cached) == iota(0, 5));  // a later iterator of the same dataset reuses it
  CHECK(*calls == 5);

  // A pass that stops early records nothing, and says so as tf.data does.
  *calls = 0;
  auto fresh = counted.cache();
  std::vector<std::string> lines;
  auto previous =
      log::set_sink([&lines](log::Level, std::string_view line) { lines.emplace_back(line); });
  CHECK(values_of(fresh.take(2)) == iota(0, 2));
  log::set_sink(previous);
  REQUIRE(lines.size() == 1);
  CHECK(contains(lines[0], "did not fully read the dataset being cached"));
  CHECK(values_of(fresh) == iota(0, 5));
  CHECK(values_of(fresh) == iota(0, 5));
  CHECK(*calls == 2 + 5);
}

TEST_CASE("row-store fast paths (slices, filled caches) give the same stream as elements") {
  // The same data through stages that take the fast paths and through an identity map that
  // forces the element-by-element path; the streams must match byte for byte.
  std::vector<float> x(40 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  Features features{{"x", Tensor::from_vector<float>(x, {40, 3})}};
  auto labels = Tensor::from_vector<int64_t>(iota(0, 40));
  auto fast = Dataset::from_tensor_slices(features, labels);
  auto slow = fast.map([](Element e) { return e; });
  using est::testing::serialized;
  CHECK(serialized(drain(fast.shuffle(9, 2).batch(4))) ==
        serialized(drain(slow.shuffle(9, 2).batch(4))));
  CHECK(serialized(drain(fast.batch(7, true))) == serialized(drain(slow.batch(7, true))));
  // Epochs 2 and 3 read the filled cache by rows; epoch 1 fills it element by element.
  CHECK(serialized(drain(slow.cache().shuffle(9, 2).batch(4).repeat(3))) ==
        serialized(drain(slow.shuffle(9, 2).batch(4).repeat(3))));
  // A cache of elements with different shapes keeps elements; shuffle still works by rows.
  auto runs = Dataset::range(1, 9).map([](Element e) { return run_of(value(e)); });
  CHECK(serialized(drain(runs.cache().shuffle(5, 1).padded_batch(3).repeat(2))) ==
        serialized(drain(runs.shuffle(5, 1).padded_batch(3).repeat(2))));
}

TEST_CASE("cache(path) writes a file on the first pass and later runs read it") {
  std::string path = est::testing::scratch_file("cache_basic");
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto make = [&] {
    return Dataset::range(6)
        .map([calls](Element e) {
          ++*calls;
          return Element(Features{{"x", Tensor::full({2}, static_cast<double>(value(e)))}},
                         e.value);
        })
        .cache(path);
  };
  auto first = drain(make());
  CHECK(std::filesystem::exists(path));
  CHECK(*calls == 6);
  auto second = drain(make());  // a new pipeline (another run) finds the file
  CHECK(*calls == 6);
  REQUIRE(second.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(second[i].labels.item() == static_cast<double>(i));
    CHECK(second[i].features.at("x").to_vector<float>() ==
          first[i].features.at("x").to_vector<float>());
  }
  // A partial pass leaves no file (and no temporary) behind.
  std::string partial = est::testing::scratch_file("cache_partial");
  values_of(Dataset::range(6).cache(partial).take(2));
  CHECK_FALSE(std::filesystem::exists(partial));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(est::testing::scratch_dir()))
    files += contains(entry.path().string(), "cache_partial");
  CHECK(files == 0);
}

TEST_CASE("prefetch delivers the same stream, forwards errors in order, and stops cleanly") {
  CHECK(values_of(Dataset::range(100).prefetch(3)) == iota(0, 100));
  CHECK(values_of(Dataset::range(100).batch(7).prefetch()) == iota(0, 100));
  auto failing = Dataset::range(10).map([](Element e) {
    if (value(e) == 5) throw DataLossError("element 5 is corrupt");
    return e;
  });
  auto it = failing.prefetch(2).iterator();
  for (int64_t i = 0; i < 5; ++i) CHECK(value(*it.next()) == i);
  CHECK(error_message<DataLossError>([&] { it.next(); }) == "element 5 is corrupt");
  CHECK_FALSE(it.next());
  {
    auto endless = Dataset::range(1).repeat().prefetch(4).iterator();
    CHECK(endless.next());
  }  // destroying an iterator whose thread waits on a full queue must not hang
  CHECK(contains(error_message<InvalidArgumentError>([] { Dataset::range(3).prefetch(0); }),
                 "buffer_size"));
}

TEST_CASE("interleave cycles through datasets in blocks, the same in parallel") {
  auto open = [](const Element& e) { return Dataset::range(value(e) * 10, value(e) * 10 + 4); };
  std::vector<int64_t> blocks_of_one{0, 10, 1, 11, 2, 12, 3, 13, 20, 21, 22, 23};
  CHECK(values_of(Dataset::range(3).interleave(open, 2, 1)) == blocks_of_one);
  CHECK(values_of(Dataset::range(3).interleave(open, 2, 1, 3)) == blocks_of_one);
  std::vector<int64_t> blocks_of_two{0, 1, 10, 11, 2, 3, 12, 13, 20, 21, 22, 23};
  CHECK(values_of(Dataset::range(3).interleave(open, 2, 2)) == blocks_of_two);
  CHECK(values_of(Dataset::range(3).interleave(open, 2, 2, kAutotune)) == blocks_of_two);
  // cycle_length 1 is concatenation.
  CHECK(values_of(Dataset::range(2).interleave(open, 1)) ==
        std::vector<int64_t>{0, 1, 2, 3, 10, 11, 12, 13});
  // Datasets of lengths 0, 1, 2, 3: an exhausted slot takes the next input when its turn comes.
  auto uneven = [](const Element& e) {
    return Dataset::range(value(e) * 10, value(e) * 10 + value(e));
  };
  CHECK(values_of(Dataset::range(4).interleave(uneven, 3)) ==
        std::vector<int64_t>{10, 20, 30, 21, 31, 32});
}

TEST_CASE("is_infinite: repeat() forever with no take(n) after it") {
  Dataset range = Dataset::range(4);
  CHECK_FALSE(is_infinite(range));
  CHECK_FALSE(is_infinite(range.repeat(3).batch(2)));
  CHECK(is_infinite(range.repeat()));
  CHECK(is_infinite(range.shuffle(4, 1).repeat().batch(2).prefetch(1)));
  CHECK_FALSE(is_infinite(range.repeat().take(10)));
  CHECK(is_infinite(range.repeat().take(-1)));
  CHECK(is_infinite(range.take(2).repeat()));
}
