// Iterator save/restore: after restoring, the rest of the stream is identical to what the saved
// iterator went on to produce, for every stage; mismatched or damaged states are rejected; elements
// given back (put_back) are part of the state.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <memory>

#include "data/data.h"
#include "data/state.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::check_resume;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::serialized;

namespace {

int64_t value(const Element& e) { return static_cast<int64_t>(e.value.item()); }

Element plus_thousand(Element e) {
  return Element(Features{{"x", Tensor::full({2}, static_cast<double>(value(e)))}},
                 Tensor::scalar(static_cast<double>(value(e) + 1000), DType::kI64));
}

}  // namespace

TEST_CASE("source -> map -> shuffle(seed) -> batch -> repeat resumes exactly") {
  auto ds = Dataset::range(100).map(plus_thousand).shuffle(16, 7).batch(5).repeat(3);
  check_resume(ds, {0, 1, 7, 19, 20, 21, 45, 59});
}

TEST_CASE("parallel map, filter, take, skip, shard and prefetch resume exactly") {
  auto even = [](const Element& e) { return static_cast<int64_t>(e.labels.item()) % 2 == 0; };
  check_resume(Dataset::range(60).map(plus_thousand, 4).filter(even).batch(4), {0, 1, 3, 6});
  check_resume(Dataset::range(50).skip(5).take(30).shard(3, 1), {0, 2, 5});
  check_resume(Dataset::range(200).map(plus_thousand).shuffle(30, 3).prefetch(8), {0, 1, 50, 150});
  check_resume(Dataset::range(40).batch(3).prefetch(2).repeat(2), {0, 5, 13, 14, 20});
  check_resume(Dataset::range(30).shuffle(10, 9, true).repeat().take(75), {0, 29, 30, 31, 60});
}

TEST_CASE("interleave, padded_batch and caches resume exactly") {
  auto open = [](const Element& e) {
    return Dataset::range(value(e) * 100, value(e) * 100 + value(e) + 2);
  };
  check_resume(Dataset::range(6).interleave(open, 3, 2), {0, 1, 4, 9, 20});
  check_resume(Dataset::range(6).interleave(open, 3, 2, 3), {0, 1, 4, 9, 20});
  auto runs = Dataset::range(1, 12).map(
      [](Element e) { return Element(Tensor::full({value(e) % 4}, 1.0, DType::kI64)); });
  check_resume(runs.padded_batch(3), {0, 1, 2});
  // The memory cache: resuming in the middle of filling, and in a later epoch (reading).
  check_resume(Dataset::range(20).map(plus_thousand).cache().shuffle(8, 1).repeat(3),
               {0, 5, 25, 41});
  std::string path = est::testing::scratch_file("resume_cache");
  check_resume(Dataset::range(20).map(plus_thousand).cache(path).repeat(2), {0, 5, 20, 33});
}

TEST_CASE("shuffle and batch over row stores (slices, a filled cache) resume exactly") {
  Features features{{"x", Tensor::from_vector<float>(std::vector<float>(60, 1.5f), {30, 2})}};
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 30; ++i) ids.push_back(i);
  auto slices = Dataset::from_tensor_slices(features, Tensor::from_vector<int64_t>(ids));
  check_resume(slices.shuffle(8, 4).batch(4).repeat(2), {0, 1, 3, 8, 9});
  check_resume(slices.map([](Element e) { return e; }).cache().shuffle(8, 4).batch(4).repeat(3),
               {0, 3, 8, 9, 16, 20});
}

TEST_CASE("a reading cache's state restores into a process whose cache is empty") {
  auto make = [] { return Dataset::range(10).map(plus_thousand).cache().repeat(2); };
  auto ds = make();
  auto it = ds.iterator();
  for (int i = 0; i < 13; ++i) it.next();  // into the second epoch: reading the cache
  std::string state = it.save_state();
  auto rest = serialized(est::testing::drain(it));
  auto restored = make().iterator();  // a new dataset: its cache is empty, as after a restart
  restored.restore_state(state);
  CHECK(serialized(est::testing::drain(restored)) == rest);
}

TEST_CASE("a filling memory cache saves a position, not its data, and still resumes exactly") {
  // Elements of 1 KiB behind a shuffle buffer of 100: saving while the cache fills used to
  // store the buffered elements (and a checkpoint carried them); now the buffer holds row
  // numbers of the cache and the cache its position.
  auto calls = std::make_shared<std::atomic<int64_t>>(0);
  auto big = [calls](Element e) {
    ++*calls;
    return Element(Features{{"x", Tensor::full({256}, static_cast<double>(value(e)))}},
                   Tensor::scalar(static_cast<double>(value(e)), DType::kI64));
  };
  auto make = [&] {
    return Dataset::range(300).map(big).cache().shuffle(100, 5).batch(10).repeat(2);
  };
  const size_t element_bytes =
      serialize_element(big(Element(Tensor::scalar(1.0, DType::kI64)))).size();
  REQUIRE(element_bytes > 1024);

  auto it = make().iterator();
  for (int i = 0; i < 7; ++i) REQUIRE(it.next());  // 170 elements read, 100 of them buffered
  std::string state = it.save_state();
  CHECK_MESSAGE(state.size() < 2 * element_bytes, state.size());
  auto rest = serialized(est::testing::drain(it));

  // A new process: the cache is empty; restoring reads the 170 elements again and goes on
  // recording, so the input runs once per element in all (the second epoch reads the cache).
  calls->store(0);
  auto restored = make().iterator();
  restored.restore_state(state);
  CHECK(serialized(est::testing::drain(restored)) == rest);
  CHECK(calls->load() == 300);

  check_resume(make(), {0, 1, 7, 19, 29, 30, 31, 45});
}

TEST_CASE("a filling cache's state from before positions were saved still restores") {
  // The old layout: "cache", mode 0, then the input's state (no position, no recording).
  auto make = [] { return Dataset::range(20).map(plus_thousand).cache(); };
  auto it = make().iterator();
  for (int i = 0; i < 6; ++i) REQUIRE(it.next());
  std::string state = it.save_state();
  auto rest = serialized(est::testing::drain(it));

  StateReader reader(state);
  StateWriter old;
  old.write_string(reader.read_string());  // the state's header
  reader.expect_stage("cache");
  REQUIRE(reader.read_u64() == 2);  // filling, with a position ...
  CHECK(reader.read_i64() == 6);    // ... of 6 elements
  old.begin_stage("cache");
  old.write_u64(0);
  std::string old_state = old.take() + state.substr(reader.position());

  auto restored = make().iterator();
  restored.restore_state(old_state);
  CHECK(serialized(est::testing::drain(restored)) == rest);
}

TEST_CASE("from_generator resumes by replaying a deterministic generator") {
  auto ds = Dataset::from_generator([] {
    return [i = int64_t{0}]() mutable -> std::optional<Element> {
      if (i == 12) return std::nullopt;
      ++i;
      return Element(Tensor::scalar(static_cast<double>(i * i), DType::kI64));
    };
  });
  check_resume(ds.batch(5), {0, 1, 2});
}

TEST_CASE("a state restored into a different pipeline, or damaged, is rejected") {
  auto it = Dataset::range(10).shuffle(4, 1).batch(2).iterator();
  it.next();
  std::string state = it.save_state();

  auto other = Dataset::range(10).batch(2).iterator();
  std::string message = error_message<InvalidArgumentError>([&] { other.restore_state(state); });
  CHECK(contains(message, "does not match this pipeline"));
  CHECK(contains(message, "'range' stage"));
  CHECK(contains(message, "'shuffle' stage"));

  auto same = Dataset::range(10).shuffle(4, 1).batch(2).iterator();
  CHECK(contains(error_message<InvalidArgumentError>([&] { same.restore_state("garbage"); }),
                 "not an input-pipeline state"));
  CHECK(contains(
      error_message<DataLossError>([&] { same.restore_state(state.substr(0, state.size() - 5)); }),
      "truncated"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { same.restore_state(state + "xyz"); }),
                 "left over"));
  // A smaller shuffle buffer cannot take the saved buffer's elements.
  auto smaller = Dataset::range(10).shuffle(2, 1).batch(2).iterator();
  CHECK(contains(error_message<InvalidArgumentError>([&] { smaller.restore_state(state); }),
                 "shuffle buffer of 2"));
  // The intact state still restores.
  same.restore_state(state);
  CHECK(same.next());
}

TEST_CASE("flipping any byte of a state gives an est::Error or a working iterator, never a crash") {
  // Elements in a shuffle buffer, and row numbers of a cache being filled.
  for (const auto& make : std::vector<std::function<Dataset()>>{
           [] {
             return Dataset::range(40)
                 .map(plus_thousand)
                 .shuffle(6, 2)
                 .batch(3)
                 .repeat(2)
                 .prefetch(2);
           },
           [] { return Dataset::range(40).map(plus_thousand).cache().shuffle(6, 2).batch(3); }}) {
    auto it = make().iterator();
    for (int i = 0; i < 9; ++i) it.next();
    std::string state = it.save_state();
    int rejected = 0;
    for (size_t position = 0; position < state.size(); position += 7) {
      for (int bit : {0, 6}) {
        std::string damaged = state;
        damaged[position] = static_cast<char>(damaged[position] ^ (1 << bit));
        auto fresh = make().iterator();
        try {
          fresh.restore_state(damaged);
          for (int i = 0; i < 3; ++i) fresh.next();
        } catch (const Error&) {
          ++rejected;
        }
      }
    }
    CHECK(rejected > 0);
  }
}

TEST_CASE("a shuffle buffer restored with a row its input has not reached is rejected") {
  std::vector<int64_t> ids(30);
  for (int64_t i = 0; i < 30; ++i) ids[static_cast<size_t>(i)] = i;
  auto make = [&] {
    return Dataset::from_tensor_slices(Tensor::from_vector<int64_t>(ids)).shuffle(4, 1);
  };
  auto it = make().iterator();
  REQUIRE(it.next());
  std::string state = it.save_state();
  StateReader reader(state);
  reader.read_string();  // the state's header
  reader.expect_stage("shuffle");
  for (int word = 0; word < 4; ++word) reader.read_u64();  // the generator
  reader.read_bool();                                      // input done
  REQUIRE(reader.read_bool());                             // buffered as rows
  REQUIRE(reader.read_u64() == 3);                         // 4 read, 1 drawn
  StateWriter bad_row;
  bad_row.write_i64(1000);
  std::string damaged = state;
  damaged.replace(reader.position(), 8, bad_row.bytes());
  auto fresh = make().iterator();
  CHECK(contains(error_message<InvalidArgumentError>([&] { fresh.restore_state(damaged); }),
                 "shuffle buffer holds row 1000 of an input at row 4"));
}

TEST_CASE("elements given back come next, and a state keeps them") {
  auto make = [] { return Dataset::range(20).shuffle(5, 3).batch(2).prefetch(2); };
  auto full = serialized(drain(make()));
  auto it = make().iterator();
  for (int i = 0; i < 3; ++i) REQUIRE(it.next());
  std::string before = it.save_state();
  std::vector<Element> read;
  for (int i = 0; i < 2; ++i) read.push_back(*it.next());
  it.put_back(read);  // a step that did not run: 3 elements used, not 5
  std::string state = it.save_state();
  std::vector<std::string> expected(full.begin() + 3, full.end());

  auto restored = make().iterator();
  restored.restore_state(state);
  CHECK(serialized(drain(restored)) == expected);
  CHECK(serialized(drain(it)) == expected);
  // Restoring a state replaces what was given back before.
  auto other = make().iterator();
  other.put_back({*other.next()});
  other.restore_state(before);
  CHECK(serialized(drain(other)) == expected);
  // A damaged count is an error, not an allocation of its size.
  std::string damaged = state;
  StateReader reader(state);
  reader.read_string();
  StateWriter huge;
  huge.write_u64(uint64_t{1} << 60);
  damaged.replace(reader.position(), 8, huge.bytes());
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { make().iterator().restore_state(damaged); }),
      "elements given back"));
}
