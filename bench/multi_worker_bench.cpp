// Two worker processes against one process on this machine's two cores, training the tutorial
// CNN at the same global batch: MultiWorkerMirroredStrategy with 2 workers x 1 thread (the
// gradients all-reduced each step over the data plane: shared memory between the two, loopback
// TCP with EST_DATA_PLANE=tcp) against OneDeviceStrategy with 2 threads, both stepping through
// replica.run_train_op on in-memory Fashion-MNIST batches. Target for the ratio (workers / one
// process, issue 32): >= 0.97, and every round's above 0.9.
//
//   multi_worker_bench [--global_batch 128] [--steps 300] [--rounds 5] [--profile]
// Each round starts a fresh one-process run and a fresh 2-worker job, one after the other, and
// times `steps` steps after 20 warm-up steps; the figures are the medians of the rounds and of
// the per-round ratios. Lines: `one_process examples_per_sec=...`, `two_workers ...`,
// `ratio=...`. --profile adds, after each round, each run's split of a step (wall and CPU per
// step: input, forward, backward, the all-reduce and the wait for the peer inside it, update;
// then every thread's CPU, run delay and migrations), to compare fast and slow rounds.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <est/distribute/distribute.h>
#include <est/distribute/net/job_token.h>
#include <est/distribute/net/step_profile.h>
#include <est/nn/nn.h>

#include "bench/child_processes.h"
#include "bench/fashion_mnist_memory.h"
#include "bench/thread_stats.h"
#include "examples/cnn_model.h"

namespace {

using est::Tensor;
namespace dist = est::distribute;

// This process's steps under `strategy`; its share of each global batch (rows of the worker's
// replicas); examples/s of the whole job over `steps` timed steps.
// With `profile` (EST_STEP_PROFILE=1 set for the children), `report` gets the split of the timed
// steps: the bench's phases (input, forward, train op) and the library's (backward, reduce,
// the wait for the peer inside it, update), wall and CPU per step, and every thread's CPU time
// and run delay.
double train(dist::Strategy& strategy, const bench::InMemoryData& data, int64_t global_batch,
             int64_t steps, bool profile, std::string* report) {
  namespace sp = dist::step_profile;
  // Per-step sums of the bench's own phases: wall and CPU of the replica thread's forward pass
  // and train op, wall of the main thread's input copy; each step's wall time.
  int64_t input_wall = 0, forward_wall = 0, forward_cpu = 0, train_wall = 0, train_cpu = 0;
  std::vector<double> step_ns;
  int64_t per_replica = global_batch / strategy.num_replicas_in_sync();
  int64_t batches = data.images.dim(0) / global_batch;
  double scale = 1.0 / static_cast<double>(global_batch);
  auto step = [&](int64_t s) {
    int64_t step_start = profile ? sp::wall_ns() : 0;
    std::vector<est::data::Element> inputs;
    for (int r = 0; r < strategy.num_local_replicas(); ++r) {
      int64_t replica = strategy.worker_index() * strategy.num_local_replicas() + r;
      Tensor images = Tensor::empty({per_replica, 28, 28, 1});
      Tensor labels = Tensor::empty({per_replica}, est::DType::kI64);
      bench::copy_rows(data, (s % batches) * global_batch + replica * per_replica, images, labels);
      inputs.emplace_back(est::Features{{"image", images}}, labels);
    }
    if (profile) input_wall += sp::wall_ns() - step_start;
    strategy.run(
        [&](dist::ReplicaContext& replica) {
          int64_t wall0 = profile ? sp::wall_ns() : 0, cpu0 = profile ? sp::thread_cpu_ns() : 0;
          est::ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = examples::tutorial_cnn(ctx, replica.input().features.at("image"));
          Tensor loss =
              est::ops::mul(est::ops::sum(est::nn::sparse_softmax_cross_entropy(
                                replica.input().labels, logits, 1.0, est::nn::Reduction::kNone)),
                            scale);
          int64_t wall1 = profile ? sp::wall_ns() : 0, cpu1 = profile ? sp::thread_cpu_ns() : 0;
          replica.run_train_op(est::optim::sgd(1e-3).minimize(loss, ctx));
          if (profile) {  // one replica per process here: no race
            forward_wall += wall1 - wall0;
            forward_cpu += cpu1 - cpu0;
            train_wall += sp::wall_ns() - wall1;
            train_cpu += sp::thread_cpu_ns() - cpu1;
          }
          return loss;
        },
        inputs);
    if (profile) step_ns.push_back(static_cast<double>(sp::wall_ns() - step_start));
  };
  for (int64_t s = 0; s < 20; ++s) step(s);  // warm-up
  input_wall = forward_wall = forward_cpu = train_wall = train_cpu = 0;
  step_ns.clear();
  sp::reset();
  auto threads_before = profile ? bench::thread_stats() : std::map<int, bench::ThreadStat>{};
  auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) step(20 + s);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (profile) {
    auto threads_after = bench::thread_stats();
    std::map<int, std::string> roles{{bench::this_tid(), "main"}};
    for (const auto& [role, tid] : sp::threads()) roles[tid] = role;
    sp::Totals totals = sp::totals();
    double per = 1e6 * static_cast<double>(steps);
    std::string text = fmt::format(
        "step_ms p10/median/p90/max={}\nphase input wall_ms/step={:.3f}\n"
        "phase forward wall_ms/step={:.3f} cpu_ms/step={:.3f}\n"
        "phase train_op wall_ms/step={:.3f} cpu_ms/step={:.3f}\n",
        bench::percentiles_ms(step_ns), static_cast<double>(input_wall) / per,
        static_cast<double>(forward_wall) / per, static_cast<double>(forward_cpu) / per,
        static_cast<double>(train_wall) / per, static_cast<double>(train_cpu) / per);
    for (int p = 0; p < sp::kPhases; ++p) {
      if (p >= sp::kPsSend && totals.count[p] == 0) continue;  // a parameter server's phases
      text += fmt::format("phase {} wall_ms/step={:.3f} cpu_ms/step={:.3f} calls/step={:.2f}\n",
                          sp::phase_name(static_cast<sp::Phase>(p)),
                          static_cast<double>(totals.wall_ns[p]) / per,
                          static_cast<double>(totals.cpu_ns[p]) / per,
                          static_cast<double>(totals.count[p]) / static_cast<double>(steps));
    }
    text += bench::thread_report(threads_before, threads_after, roles, steps);
    *report = text;
  }
  return static_cast<double>(steps * global_batch) / seconds;
}

// The profile lines of a child's log ("profile " ...), each prefixed by `who`.
void print_profile(const std::string& log, const std::string& who) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("profile ", 0) == 0) fmt::print("  {} {}\n", who, line.substr(8));
}

using bench::spawn;
using bench::value_in;
using bench::wait_all;

}  // namespace

int main(int argc, char** argv) try {
  int64_t global_batch = 128, steps = 300;
  int rounds = 5;
  bool profile = false;
  std::string role;
  CLI::App app("2 worker processes x 1 thread against 1 process x 2 threads (tutorial CNN).",
               "multi_worker_bench");
  app.add_option("--global_batch", global_batch, "batch over all replicas")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per run")->capture_default_str();
  app.add_option("--rounds", rounds, "runs of each")->capture_default_str();
  app.add_flag("--profile", profile,
               "print each run's split of a step (input, forward, backward, all-reduce and the "
               "wait for the peer, update; wall and CPU) and its threads' CPU and run delay");
  app.add_option("--role", role, "internal: single or worker")->group("");
  CLI11_PARSE(app, argc, argv);

  if (!role.empty()) {
    bench::InMemoryData data = bench::load_fashion_mnist("train");
    std::shared_ptr<dist::Strategy> strategy;
    if (role == "single")
      strategy = std::make_shared<dist::OneDeviceStrategy>("/cpu:0", 7);
    else
      strategy = dist::MultiWorkerMirroredStrategy::from_env({}, {.seed = 7});
    std::string report;
    double rate = train(*strategy, data, global_batch, steps, profile, &report);
    if (strategy->is_chief())
      fmt::print("examples_per_sec={:.1f}\nthreads_per_replica={}\n", rate,
                 strategy->threads_per_replica());
    std::istringstream lines(report);
    for (std::string line; std::getline(lines, line);) fmt::print("profile {}\n", line);
    return 0;
  }

  ::setenv("EST_JOB_TOKEN", dist::generate_job_token().c_str(), 1);
  if (profile) ::setenv("EST_STEP_PROFILE", "1", 1);
  std::string self = "/proc/self/exe";
  std::vector<std::string> common = {self, "--global_batch", std::to_string(global_batch),
                                     "--steps", std::to_string(steps)};
  if (profile) common.push_back("--profile");
  std::string dir = "/tmp/est_multi_worker_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<double> singles, workers, ratios;
  for (int r = 0; r < rounds; ++r) {
    auto args = common;
    args.insert(args.end(), {"--role", "single"});
    wait_all({spawn(args, "", dir + "/single.log")});
    singles.push_back(value_in(dir + "/single.log", "examples_per_sec"));
    int p0 = 20000 + (::getpid() * 7 + r * 2) % 20000;
    std::string cluster =
        fmt::format(R"({{"worker": ["127.0.0.1:{}", "127.0.0.1:{}"]}})", p0, p0 + 1);
    args = common;
    args.insert(args.end(), {"--role", "worker"});
    std::vector<pid_t> pids;
    for (int w = 0; w < 2; ++w)
      pids.push_back(
          spawn(args,
                fmt::format(R"({{"cluster": {}, "task": {{"type": "worker", "index": {}}}}})",
                            cluster, w),
                dir + "/worker" + std::to_string(w) + ".log"));
    wait_all(pids);
    workers.push_back(value_in(dir + "/worker0.log", "examples_per_sec"));
    ratios.push_back(workers.back() / singles.back());
    fmt::print("round {}: one_process {:.1f} two_workers {:.1f} ratio {:.3f}\n", r, singles.back(),
               workers.back(), ratios.back());
    if (profile) {
      print_profile(dir + "/single.log", "single");
      for (int w = 0; w < 2; ++w)
        print_profile(dir + "/worker" + std::to_string(w) + ".log", "worker" + std::to_string(w));
    }
  }
  std::filesystem::remove_all(dir);
  fmt::print("global_batch={} steps={}\n", global_batch, steps);
  fmt::print("one_process threads=2 examples_per_sec={:.1f}\n", bench::median(singles));
  fmt::print("two_workers threads=1+1 examples_per_sec={:.1f}\n", bench::median(workers));
  fmt::print("ratio={:.3f} (target >= 0.97, every round > 0.9; range {:.3f}-{:.3f})\n",
             bench::median(ratios), *std::min_element(ratios.begin(), ratios.end()),
             *std::max_element(ratios.begin(), ratios.end()));
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
