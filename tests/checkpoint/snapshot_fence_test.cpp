// TensorBundle::snapshot's fenced copies (ops/copy_fence.h): a snapshot holds the values of
// snapshot time whatever writes the originals afterwards (data<T>(), raw_data(), copy_from,
// fill, VariableStore::assign, an optimizer step), whether the background copier or the
// writer's own thread made the copy; reading a copy before it was made gives the right values;
// a snapshot may die with copies pending; a forked child finishes the copies it needs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "checkpoint/variable_store_io.h"
#include "helpers.h"
#include "nn/optimizers.h"
#include "ops/copy_fence.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

// Pauses the copier for a scope, so only accesses make the copies (deterministic tests).
class PausedCopier {
 public:
  PausedCopier() { ops::pause_fenced_copier(true); }
  ~PausedCopier() {
    ops::pause_fenced_copier(false);
    ops::wait_for_fenced_copies();
  }
};

std::vector<float> values_of(const Tensor& t) { return t.to_vector<float>(); }

TensorBundle two_variables() {
  TensorBundle bundle;
  bundle.global_step = 7;
  bundle.add_variable("dense/kernel", iota<float>({64, 32}, 1, 0.5));
  bundle.add_variable("dense/bias", iota<float>({32}, -1, 0.25));
  return bundle;
}

}  // namespace

TEST_CASE("a snapshot keeps the values of snapshot time through every kind of write") {
  REQUIRE(ops::lazy_copies());
  PausedCopier paused;
  TensorBundle bundle = two_variables();
  Tensor kernel = bundle.find("dense/kernel")->value;
  Tensor bias = bundle.find("dense/bias")->value;
  const std::vector<float> kernel_before = values_of(kernel), bias_before = values_of(bias);

  using Write = std::function<void()>;
  const std::vector<std::pair<const char*, Write>> writes = {
      {"data<float>()", [&] { kernel.data<float>()[5] = -100; }},
      {"raw_data()", [&] { static_cast<float*>(kernel.raw_data())[0] = -200; }},
      {"copy_from", [&] { kernel.copy_from(Tensor::zeros(kernel.shape())); }},
      {"fill", [&] { kernel.fill(42); }},
      {"a reshaped handle", [&] { kernel.reshape({-1}).fill(3); }},
  };
  for (const auto& [what, write] : writes) {
    CAPTURE(what);
    const std::vector<float> at_snapshot = values_of(kernel);
    TensorBundle snapshot = bundle.snapshot();
    CHECK(ops::pending_fenced_copies() == 2);
    const int64_t fenced_ns = ops::fence_nanoseconds_on_this_thread();
    write();
    CHECK(ops::pending_fenced_copies() == 1);  // the kernel's pair, made by this thread
    CHECK(ops::fence_nanoseconds_on_this_thread() > fenced_ns);
    CHECK(values_of(snapshot.find("dense/kernel")->value) == at_snapshot);
    CHECK(values_of(snapshot.find("dense/bias")->value) == bias_before);
    CHECK(ops::pending_fenced_copies() == 0);
    CHECK_FALSE(snapshot.find("dense/kernel")->value.shares_storage(kernel));
    CHECK(snapshot.global_step == 7);
  }
  CHECK(values_of(kernel) != kernel_before);
}

TEST_CASE("reading a snapshot before its copy ran gives the values, and later writes miss it") {
  PausedCopier paused;
  TensorBundle bundle = two_variables();
  const std::vector<float> before = values_of(bundle.find("dense/kernel")->value);
  TensorBundle snapshot = bundle.snapshot();
  REQUIRE(ops::pending_fenced_copies() == 2);
  CHECK(values_of(snapshot.find("dense/kernel")->value) == before);
  bundle.find("dense/kernel")->value.fill(-1);
  CHECK(values_of(snapshot.find("dense/kernel")->value) == before);
  // A snapshot of the snapshot while the bias is still pending, then a write to the first.
  TensorBundle second = snapshot.snapshot();
  snapshot.find("dense/bias")->value.fill(9);
  CHECK(values_of(second.find("dense/bias")->value) ==
        values_of(two_variables().find("dense/bias")->value));
  CHECK(values_of(second.find("dense/kernel")->value) == before);
}

TEST_CASE("a snapshot destroyed with copies pending, and originals freed before the copy") {
  {
    PausedCopier paused;
    TensorBundle bundle = two_variables();
    { TensorBundle dropped = bundle.snapshot(); }
    CHECK(ops::pending_fenced_copies() == 2);
    bundle.find("dense/kernel")->value.fill(5);  // drops the kernel's pair, no copy needed
    CHECK(ops::pending_fenced_copies() == 1);
    CHECK(bundle.find("dense/kernel")->value.at({0, 0}) == 5.0);
  }
  CHECK(ops::pending_fenced_copies() == 0);  // the copier took the bias once resumed
  {
    PausedCopier paused;
    TensorBundle snapshot;
    std::vector<float> before;
    {
      TensorBundle bundle = two_variables();
      before = values_of(bundle.find("dense/kernel")->value);
      snapshot = bundle.snapshot();
    }  // the originals' owner is gone: the pending pair keeps their bytes
    CHECK(values_of(snapshot.find("dense/kernel")->value) == before);
  }
}

TEST_CASE("assign and an optimizer step after a snapshot of a variable store") {
  for (bool paused : {true, false}) {
    CAPTURE(paused);
    ops::pause_fenced_copier(paused);
    nn::optim::Optimizer adam = nn::optim::adam(0.1);
    nn::VariableStore store;
    Tensor kernel = store.create("dense/kernel", iota<float>({16, 8}, 1, 0.5), true);
    store.create("batch_norm/moving_mean", Tensor::zeros({8}), false);
    adam.apply_gradients(store, {iota<float>({16, 8}, 0.5, 0.25)}, {kernel});  // makes slots

    ops::set_lazy_copies(false);
    TensorBundle eager = bundle_from_store(store).snapshot();
    ops::set_lazy_copies(true);
    CHECK(ops::pending_fenced_copies() == 0);
    TensorBundle lazy = bundle_from_store(store).snapshot();
    adam.apply_gradients(store, {iota<float>({16, 8}, -0.5, 0.125)}, {kernel});
    store.assign("batch_norm/moving_mean", Tensor::ones({8}));
    ops::pause_fenced_copier(false);
    REQUIRE(lazy.tensors.size() == eager.tensors.size());
    for (size_t i = 0; i < lazy.tensors.size(); ++i) {
      CAPTURE(lazy.tensors[i].name);
      CHECK(lazy.tensors[i].name == eager.tensors[i].name);
      CHECK(same_bytes(lazy.tensors[i].value, eager.tensors[i].value));
    }
    CHECK(lazy.global_step == 1);
    CHECK(nn::read_global_step(store) == 2);
    CHECK_FALSE(same_bytes(lazy.find("dense/kernel")->value, store.get("dense/kernel").value));
    ops::wait_for_fenced_copies();
  }
}

TEST_CASE("writers on several threads while the copier runs") {
  constexpr int kTensors = 48, kThreads = 4;
  for (int round = 0; round < 5; ++round) {
    TensorBundle bundle;
    for (int i = 0; i < kTensors; ++i)
      bundle.add_variable(fmt::format("layer_{}/kernel", i), iota<float>({256, 64}, i, 0.5));
    std::vector<std::vector<float>> before;
    for (const TensorEntry& entry : bundle.tensors) before.push_back(values_of(entry.value));
    TensorBundle snapshot = bundle.snapshot();
    std::vector<std::thread> writers;
    for (int w = 0; w < kThreads; ++w)
      writers.emplace_back([&, w] {
        // Each writer updates its tensors in place, last first, against the copier's order.
        for (int i = kTensors - 1 - w; i >= 0; i -= kThreads) {
          float* data = bundle.tensors[static_cast<size_t>(i)].value.data<float>();
          for (int64_t j = 0; j < 256 * 64; ++j) data[j] = data[j] * 2 + 1;
        }
      });
    // The save reads the snapshot at the same time.
    std::vector<std::vector<float>> seen;
    for (const TensorEntry& entry : snapshot.tensors) seen.push_back(values_of(entry.value));
    for (std::thread& writer : writers) writer.join();
    CHECK(seen == before);
    for (int i = 0; i < kTensors; ++i)
      CHECK(bundle.tensors[static_cast<size_t>(i)].value.at({0, 0}) ==
            before[static_cast<size_t>(i)][0] * 2 + 1);
  }
  ops::wait_for_fenced_copies();
  CHECK(ops::pending_fenced_copies() == 0);
}

TEST_CASE("an asynchronous save writes the values of save time, not the next step's") {
  TempDir dir;
  TensorBundle bundle = sample_bundle(3);
  const TensorBundle expected = [&] {
    ops::set_lazy_copies(false);
    TensorBundle copy = bundle.snapshot();
    ops::set_lazy_copies(true);
    return copy;
  }();
  CheckpointManager manager({.directory = dir.str(), .async = true});
  const std::string path = manager.save(bundle);
  for (TensorEntry& entry : bundle.tensors) entry.value.fill(0);  // the next step, in place
  manager.wait();
  TensorBundle loaded = load(path);
  REQUIRE(loaded.tensors.size() == expected.tensors.size());
  for (const TensorEntry& entry : expected.tensors) {
    CAPTURE(entry.name);
    REQUIRE(loaded.find(entry.name) != nullptr);
    CHECK(same_bytes(loaded.find(entry.name)->value, entry.value));
  }
}

TEST_CASE("strings, shared storages and the eager switch") {
  PausedCopier paused;
  TensorBundle bundle = two_variables();
  Tensor words = Tensor::empty({2}, DType::kString);
  words.data<std::string>()[0] = "a";
  words.data<std::string>()[1] = "b";
  bundle.add_variable("vocab/words", words, false);
  bundle.add_variable("dense/kernel_alias", bundle.find("dense/kernel")->value.detach());
  const std::vector<float> kernel = values_of(bundle.find("dense/kernel")->value);
  TensorBundle snapshot = bundle.snapshot();  // the alias's pair finishes the kernel's first
  CHECK(ops::pending_fenced_copies() == 2);
  words.data<std::string>()[0] = "changed";
  bundle.find("dense/kernel")->value.fill(0);
  CHECK(snapshot.find("vocab/words")->value.to_vector<std::string>() ==
        std::vector<std::string>{"a", "b"});
  CHECK(values_of(snapshot.find("dense/kernel")->value) == kernel);
  CHECK(values_of(snapshot.find("dense/kernel_alias")->value) == kernel);

  ops::set_lazy_copies(false);
  TensorBundle eager = bundle.snapshot();
  ops::set_lazy_copies(true);
  CHECK(ops::pending_fenced_copies() == 0);
  CHECK(eager.find("dense/kernel")->value.at({0, 0}) == 0.0);
}

TEST_CASE("a child forked with copies pending makes them itself") {
  PausedCopier paused;
  TensorBundle bundle = two_variables();
  const std::vector<float> before = values_of(bundle.find("dense/kernel")->value);
  TensorBundle snapshot = bundle.snapshot();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bundle.find("dense/kernel")->value.data<float>()[0] = -3;  // no kernel: no OpenMP here
    const bool kernel_ok = values_of(snapshot.find("dense/kernel")->value) == before;
    ops::wait_for_fenced_copies();
    ::_exit(kernel_ok && ops::pending_fenced_copies() == 0 ? 0 : 1);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 1000 && done == 0; ++i) {  // at most 10 s
    done = ::waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  REQUIRE(done == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(values_of(snapshot.find("dense/kernel")->value) == before);
}
