// Backend selection and intra-op threads: each op kind runs on the backend the table prefers
// (seen through the dispatch counters), a BackendGuard overrides the table for every kind, and
// the thread-count rule of ops/backend.h (EST_NUM_THREADS, OMP_NUM_THREADS, cores /
// EST_LOCAL_PROCESSES) with its error messages, and the work below which kernels do not split.
#include <doctest/doctest.h>

#include <omp.h>

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ops/backend_table.h"
#include "ops/cpu/parallel.h"
#if EST_HAVE_ONEDNN
#include "ops/onednn/kernels.h"
#endif
#include "ops/ops.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::ops;
using est::testing::contains;
using est::testing::error_message;

namespace {

using Counts = std::map<std::pair<OpKind, Backend>, int64_t>;

Counts all_counts() {
  Counts counts;
  for (OpKind kind : all_op_kinds())
    for (Backend backend : available_cpu_backends())
      counts[{kind, backend}] = dispatch_count(kind, backend);
  return counts;
}

// One forward and backward of an op of every kind (conv2d twice: a first layer, whose input
// needs no gradient, and one whose input does).
void run_every_kind() {
  Generator generator(11);
  auto leaf = [&](Shape shape) {
    return random_uniform(shape, -1, 1, generator).set_requires_grad(true);
  };
  Tensor images = random_uniform({2, 6, 6, 3}, 0, 1, generator);
  Tensor kernel = leaf({3, 3, 3, 16}), bias = leaf({16});
  Tensor h = conv2d(images, kernel, bias, {.activation = Activation::kRelu});
  h = conv2d(h, leaf({3, 3, 16, 16}), Tensor(), {.padding = Padding::kSame});
  h = max_pool2d(h, {});
  h = relu(h);
  h = batch_norm_training(h, leaf({16}), leaf({16}), 1e-3).output;
  h = linear(h.reshape({2, -1}), leaf({64, 5}), leaf({5}), Activation::kNone);
  Tensor loss = sum(log_softmax(h, -1));
  backward(loss);
}

struct EnvMap {
  std::map<std::string, std::string> values;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    };
  }
};

ThreadPlan plan(std::map<std::string, std::string> values, int cores) {
  EnvMap env{std::move(values)};
  return plan_threads(env.lookup(), cores);
}

std::string plan_error(std::map<std::string, std::string> values) {
  return error_message<InvalidArgumentError>([&] { plan(std::move(values), 8); });
}

}  // namespace

TEST_CASE("backend: every op kind has a name and a preferred backend this build has") {
  std::set<std::string> names;
  for (OpKind kind : all_op_kinds()) {
    names.insert(std::string(op_kind_name(kind)));
    CHECK(backend_available(preferred_cpu_backend(kind)));
    const Backend listed = kPreferredCpuBackends[static_cast<size_t>(kind)].backend;
    CHECK(preferred_cpu_backend(kind) ==
          (backend_available(listed) ? listed : Backend::kReference));
  }
  CHECK(names.size() == static_cast<size_t>(kNumOpKinds));
  CHECK(all_op_kinds().size() == static_cast<size_t>(kNumOpKinds));
}

TEST_CASE("backend: without a guard each op kind runs on the table's backend") {
  const Counts before = all_counts();
  run_every_kind();
  const Counts after = all_counts();
  for (OpKind kind : all_op_kinds()) {
    INFO(op_kind_name(kind));
    CHECK(cpu_backend_for(kind) == preferred_cpu_backend(kind));
    for (Backend backend : available_cpu_backends()) {
      INFO(backend_name(backend));
      const int64_t ran = after.at({kind, backend}) - before.at({kind, backend});
      if (backend == preferred_cpu_backend(kind))
        CHECK(ran > 0);
      else
        CHECK(ran == 0);
    }
  }
}

TEST_CASE("backend: a guard forces its backend on every kind, and nested guards restore") {
  for (Backend forced : available_cpu_backends()) {
    INFO(backend_name(forced));
    CHECK_FALSE(forced_cpu_backend().has_value());
    BackendGuard guard(forced);
    CHECK(forced_cpu_backend() == forced);
    for (OpKind kind : all_op_kinds()) CHECK(cpu_backend_for(kind) == forced);
    const Counts before = all_counts();
    run_every_kind();
    const Counts after = all_counts();
    for (OpKind kind : all_op_kinds())
      for (Backend backend : available_cpu_backends()) {
        INFO(op_kind_name(kind), " on ", backend_name(backend));
        const int64_t ran = after.at({kind, backend}) - before.at({kind, backend});
        CHECK((backend == forced ? ran > 0 : ran == 0));
      }
    {
      BackendGuard inner(Backend::kReference);
      CHECK(cpu_backend_for(OpKind::kMatmul) == Backend::kReference);
    }
    CHECK(cpu_backend_for(OpKind::kMatmul) == forced);
  }
  for (OpKind kind : all_op_kinds()) CHECK(cpu_backend_for(kind) == preferred_cpu_backend(kind));
  CHECK(contains(error_message<InvalidArgumentError>([] { BackendGuard guard(Backend::kCuda); }),
                 "'cuda' cannot run CPU ops"));
}

TEST_CASE("backend: float64 ops run on the reference whatever the table says") {
  const int64_t before = dispatch_count(OpKind::kMatmul, Backend::kReference);
  matmul(Tensor::ones({2, 3}, DType::kF64), Tensor::ones({3, 4}, DType::kF64));
  CHECK(dispatch_count(OpKind::kMatmul, Backend::kReference) == before + 1);
}

TEST_CASE("threads: the cores are divided among the local processes") {
  ThreadPlan one = plan({}, 8);
  CHECK(one.threads == 8);
  CHECK(one.local_processes == 1);
  CHECK(one.cores == 8);
  CHECK_FALSE(one.oversubscribed);
  CHECK(one.rule == "8 cores / 1 local process");

  ThreadPlan shared = plan({{"EST_LOCAL_PROCESSES", "3"}}, 8);
  CHECK(shared.threads == 2);  // 8 / 3, rounded down: processes x threads <= cores
  CHECK(shared.local_processes == 3);
  CHECK_FALSE(shared.oversubscribed);
  CHECK(shared.rule == "8 cores / 3 local processes");

  ThreadPlan crowded = plan({{"EST_LOCAL_PROCESSES", "4"}}, 2);
  CHECK(crowded.threads == 1);  // never fewer than one
  CHECK(crowded.oversubscribed);

  CHECK(plan({}, 0).threads == 1);  // a core count that failed to read counts as one
}

TEST_CASE("threads: EST_NUM_THREADS, then OMP_NUM_THREADS, override the division") {
  ThreadPlan explicit_count =
      plan({{"EST_NUM_THREADS", "3"}, {"OMP_NUM_THREADS", "5"}, {"EST_LOCAL_PROCESSES", "2"}}, 8);
  CHECK(explicit_count.threads == 3);
  CHECK(explicit_count.rule == "EST_NUM_THREADS=3");
  CHECK(explicit_count.explicit_count);
  CHECK_FALSE(plan({{"EST_LOCAL_PROCESSES", "2"}}, 8).explicit_count);
  CHECK(explicit_count.local_processes == 2);
  CHECK_FALSE(explicit_count.oversubscribed);

  ThreadPlan omp = plan({{"OMP_NUM_THREADS", "5,2"}, {"EST_LOCAL_PROCESSES", "2"}}, 8);
  CHECK(omp.threads == 5);  // the first level of OpenMP's list
  CHECK(omp.rule == "OMP_NUM_THREADS=5");
  CHECK(omp.explicit_count);
  CHECK(omp.oversubscribed);  // 5 x 2 > 8

  CHECK(plan({{"EST_NUM_THREADS", " 4 "}}, 2).threads == 4);  // spaces around are fine
  CHECK(plan({{"EST_NUM_THREADS", ""}}, 6).threads == 6);     // empty means unset
  CHECK(plan({{"EST_NUM_THREADS", "4"}}, 2).oversubscribed);
}

TEST_CASE("threads: a passive wait or a short GOMP_SPINCOUNT counts as a short spin") {
  CHECK_FALSE(plan({}, 2).short_spin);
  CHECK(plan({{"OMP_WAIT_POLICY", "PASSIVE"}}, 2).short_spin);
  CHECK_FALSE(plan({{"OMP_WAIT_POLICY", "active"}}, 2).short_spin);
  CHECK(plan({{"GOMP_SPINCOUNT", "10000"}}, 2).short_spin);
  CHECK(plan({{"GOMP_SPINCOUNT", "100k"}}, 2).short_spin);
  CHECK_FALSE(plan({{"GOMP_SPINCOUNT", "1M"}}, 2).short_spin);
  CHECK_FALSE(plan({{"GOMP_SPINCOUNT", "infinite"}}, 2).short_spin);
}

TEST_CASE("threads: a bad value is an error that names the variable") {
  for (const char* name : {"EST_NUM_THREADS", "EST_LOCAL_PROCESSES", "OMP_NUM_THREADS"}) {
    for (const char* value : {"0", "-2", "two", "2x", "1.5", "99999999"}) {
      INFO(name, "=", value);
      const std::string message = plan_error({{name, value}});
      CHECK(contains(message, std::string(name) + "='" + value + "'"));
      CHECK(contains(message, "not a positive integer"));
    }
  }
  CHECK(contains(plan_error({{"EST_LOCAL_PROCESSES", "0"}}), "processes that share this host"));
}

TEST_CASE("threads: the environment for a launcher's children") {
  auto variables = thread_environment_for_children(3);
  std::map<std::string, std::string> env(variables.begin(), variables.end());
  CHECK(env.at("EST_LOCAL_PROCESSES") == "3");
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    CHECK(env.at("GOMP_SPINCOUNT") == "10000");
  CHECK(plan(std::map<std::string, std::string>(env.begin(), env.end()), 6).threads == 2);
  CHECK(contains(error_message<InvalidArgumentError>([] { thread_environment_for_children(0); }),
                 "at least one local process"));
}

TEST_CASE("threads: every thread starts with the configured count; set_num_threads is per thread") {
  const ThreadPlan& configured = configure_threads();
  CHECK(&configure_threads() == &configured);  // configured once
  CHECK(configured.cores == available_cores());
  CHECK(available_cores() >= 1);
  CHECK(available_cores() <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  int fresh = 0, own = 0;
  std::thread([&] { fresh = num_threads(); }).join();
  std::thread([&] {
    set_num_threads(configured.threads + 1);
    own = num_threads();
  }).join();
  CHECK(fresh == configured.threads);
  CHECK(own == configured.threads + 1);
  CHECK(contains(error_message<InvalidArgumentError>([] { set_num_threads(0); }),
                 "at least one thread"));
}

TEST_CASE("threads: a strategy told of more local processes divides the cores among them") {
  const ThreadPlan& configured = configure_threads();
  for (int processes = 1; processes <= 4; ++processes) {
    INFO(processes, " local processes");
    const int expected =
        configured.explicit_count
            ? configured.threads
            : std::max(1, configured.cores / std::max(processes, configured.local_processes));
    CHECK(threads_for_local_processes(processes) == expected);
  }
}

TEST_CASE("threads: loops at most the grain run inline on the calling thread, larger ones split") {
  // The suites keep the count fixed (tests/main.cpp), so two requested threads are two.
  struct Call {
    int64_t begin, end;
    std::thread::id thread;
  };
  const auto calls_of = [](int64_t n) {
    std::vector<Call> calls;
    std::mutex mutex;
    std::thread([&] {
      set_num_threads(2);
      cpu::parallel_for(n, cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        std::lock_guard lock(mutex);
        calls.push_back({begin, end, std::this_thread::get_id()});
      });
      std::lock_guard lock(mutex);
      calls.push_back({-1, -1, std::this_thread::get_id()});  // the caller, last
    }).join();
    return calls;
  };
  const std::vector<Call> small = calls_of(cpu::kElementwiseGrain);
  REQUIRE(small.size() == 2);
  CHECK(small[0].begin == 0);
  CHECK(small[0].end == cpu::kElementwiseGrain);
  CHECK(small[0].thread == small[1].thread);

  const std::vector<Call> large = calls_of(4 * cpu::kElementwiseGrain);
  REQUIRE(large.size() == 3);
  std::set<std::pair<int64_t, int64_t>> chunks{{large[0].begin, large[0].end},
                                               {large[1].begin, large[1].end}};
  CHECK(chunks == std::set<std::pair<int64_t, int64_t>>{
                      {0, 2 * cpu::kElementwiseGrain},
                      {2 * cpu::kElementwiseGrain, 4 * cpu::kElementwiseGrain}});
  CHECK(large[0].thread != large[1].thread);
}

TEST_CASE("threads: a SerialScope runs OpenMP on one thread for its lifetime only") {
  std::thread([] {
    omp_set_num_threads(3);
    {
      cpu::SerialScope serial(true);
      CHECK(omp_get_max_threads() == 1);
    }
    CHECK(omp_get_max_threads() == 3);
    {
      cpu::SerialScope not_serial(false);
      CHECK(omp_get_max_threads() == 3);
    }
  }).join();
}

#if EST_HAVE_ONEDNN
TEST_CASE("threads: small oneDNN matmuls run on the calling thread") {
  using onednn::kSerialMatmulFlops;
  using onednn::matmul_runs_serially;
  CHECK(matmul_runs_serially({.batch = 1, .m = 64, .n = 10, .k = 64}));  // the CNN's last dense
  CHECK_FALSE(matmul_runs_serially({.batch = 1, .m = 64, .n = 64, .k = 5408}));  // its first
  // The threshold counts 2 x batch x m x n x k floating-point operations.
  const int64_t k = kSerialMatmulFlops / (2 * 4 * 8);
  CHECK(matmul_runs_serially({.batch = 2, .m = 4, .n = 4, .k = k - 1}));
  CHECK_FALSE(matmul_runs_serially({.batch = 2, .m = 4, .n = 4, .k = k}));
}
#endif
