// Two worker processes against one process on this machine's two cores, training the tutorial
// CNN at the same global batch: MultiWorkerMirroredStrategy with 2 workers x 1 thread (the
// gradients all-reduced each step over the data plane: shared memory between the two, loopback
// TCP with EST_DATA_PLANE=tcp) against OneDeviceStrategy with 2 threads, both stepping through
// replica.run_train_op on in-memory Fashion-MNIST batches. Target for the ratio (workers / one
// process, issue 32): >= 0.97, and every round's above 0.9.
//
//   multi_worker_bench [--global_batch 128] [--steps 300] [--rounds 5] [--block_steps 50]
//                      [--profile] [--no_exchange]
// Each round starts a fresh one-process run and a fresh 2-worker job together and lets them
// train in turns, `block_steps` steps at a time (A B B A A B ..., bench/block_gate.h), so that
// both rates are measured over the same seconds of a host whose speed drifts; each times
// `steps` steps after one untimed block (the 20 warm-up steps and a first block). With
// --block_steps 0 they run one after the other instead, as before, each timing `steps` steps
// after 20 warm-up steps. The figures are the medians of the rounds and of the per-round ratios.
// Lines: `one_process examples_per_sec=...`, `two_workers ...`, `ratio=...`; each round's line is
// followed by its blocks' times (ms). --profile adds, after each round, each run's split of a
// step (wall and CPU per step: input, forward, backward, the all-reduce and the wait for the
// peer inside it, update; then every thread's CPU, run delay and migrations), to compare fast
// and slow rounds.
// --no_exchange replaces the job by two independent processes (OneDeviceStrategy, 1 thread, half
// the global batch each, nothing exchanged), gated like the workers: a block ends when both have
// run its steps, as the job's does. The ratio then is what the job could reach with an exchange
// that cost nothing and workers that never waited for each other within a block: two 1-thread
// processes side by side against one 2-thread process (printed as `ratio_without_exchange=`).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <est/distribute/distribute.h>
#include <est/distribute/net/job_token.h>
#include <est/nn/nn.h>

#include "bench/block_gate.h"
#include "bench/child_processes.h"
#include "bench/fashion_mnist_memory.h"
#include "bench/step_timer.h"
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
// With `block_steps` > 0 the process is gated (bench/block_gate.h): it says it is ready, then
// runs the warm-up and blocks of `block_steps` timed steps as the parent lets it, and the rate
// is over the blocks' time alone.
double train(dist::Strategy& strategy, const bench::InMemoryData& data, int64_t global_batch,
             int64_t steps, int64_t block_steps, bool profile, std::string* report) {
  bench::StepTimer timer(profile);
  int64_t per_replica = global_batch / strategy.num_replicas_in_sync();
  int64_t batches = data.images.dim(0) / global_batch;
  double scale = 1.0 / static_cast<double>(global_batch);
  auto step = [&](int64_t s) {
    timer.step_begins();
    std::vector<est::data::Element> inputs;
    for (int r = 0; r < strategy.num_local_replicas(); ++r) {
      int64_t replica = strategy.worker_index() * strategy.num_local_replicas() + r;
      Tensor images = Tensor::empty({per_replica, 28, 28, 1});
      Tensor labels = Tensor::empty({per_replica}, est::DType::kI64);
      bench::copy_rows(data, (s % batches) * global_batch + replica * per_replica, images, labels);
      inputs.emplace_back(est::Features{{"image", images}}, labels);
    }
    timer.input_ends();
    strategy.run(
        [&](dist::ReplicaContext& replica) {
          timer.forward_begins();
          est::ModelContext& ctx = replica.model_context();
          ctx.begin_call();
          Tensor logits = examples::tutorial_cnn(ctx, replica.input().features.at("image"));
          Tensor loss =
              est::ops::mul(est::ops::sum(est::nn::sparse_softmax_cross_entropy(
                                replica.input().labels, logits, 1.0, est::nn::Reduction::kNone)),
                            scale);
          timer.train_op_begins();
          replica.run_train_op(est::optim::sgd(1e-3).minimize(loss, ctx));
          timer.train_op_ends();
          return loss;
        },
        inputs);
    timer.step_ends();
  };
  if (block_steps > 0) {
    bench::GatedRun run = bench::run_gated_blocks(20, block_steps, step, [&] { timer.start(); });
    if (profile) *report = timer.report(run.timed_steps);
    return static_cast<double>(run.timed_steps * global_batch) / run.seconds;
  }
  for (int64_t s = 0; s < 20; ++s) step(s);  // warm-up
  timer.start();
  auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) step(20 + s);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (profile) *report = timer.report(steps);
  return static_cast<double>(steps * global_batch) / seconds;
}

// One round with the three processes started together and let go in blocks, in turns (A: the
// one process, B: the two workers). On an error the children are killed and their logs kept.
template <class Config, class Log>
bench::Interleaved run_interleaved(const std::vector<std::string>& single_args,
                                   const std::vector<std::string>& worker_args,
                                   const Config& tf_config, const Log& worker_log,
                                   const std::string& dir, int64_t blocks) {
  try {
    return bench::interleave_round(
        [&](std::vector<bench::GatedChild>& gated, std::vector<bench::GatedChild>&) {
          gated.push_back(bench::spawn_gated(single_args, "", dir + "/single.log"));
          for (int w = 0; w < 2; ++w)
            gated.push_back(bench::spawn_gated(worker_args, tf_config(w), worker_log(w)));
        },
        blocks);
  } catch (...) {
    fmt::print(stderr, "the children's logs: {}\n", dir);
    throw;
  }
}

using bench::spawn;
using bench::value_in;
using bench::wait_all;

}  // namespace

int main(int argc, char** argv) try {
  int64_t global_batch = 128, steps = 300, block_steps = 50;
  int rounds = 5;
  bool profile = false, no_exchange = false;
  std::string role;
  CLI::App app("2 worker processes x 1 thread against 1 process x 2 threads (tutorial CNN).",
               "multi_worker_bench");
  app.add_option("--global_batch", global_batch, "batch over all replicas")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per run")->capture_default_str();
  app.add_option("--rounds", rounds, "runs of each")->capture_default_str();
  app.add_option("--block_steps", block_steps,
                 "interleave the two runs of a round in blocks of this many steps (A B B A ...; "
                 "0: one run after the other)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--profile", profile,
               "print each run's split of a step (input, forward, backward, all-reduce and the "
               "wait for the peer, update; wall and CPU) and its threads' CPU and run delay");
  app.add_flag("--no_exchange", no_exchange,
               "two independent 1-thread processes at half the batch each instead of the job: "
               "the ratio no exchange can beat on this machine");
  app.add_option("--role", role, "internal: single, worker or alone")->group("");
  CLI11_PARSE(app, argc, argv);

  if (!role.empty()) {
    // One of two processes sharing the cores: the thread count the job's workers get, too.
    if (role == "alone") ::setenv("EST_LOCAL_PROCESSES", "2", 1);
    bench::InMemoryData data = bench::load_fashion_mnist("train");
    std::shared_ptr<dist::Strategy> strategy;
    int64_t batch = global_batch;
    if (role == "single") {
      strategy = std::make_shared<dist::OneDeviceStrategy>("/cpu:0", 7);
    } else if (role == "alone") {
      strategy = std::make_shared<dist::OneDeviceStrategy>("/cpu:0", 7);
      batch = global_batch / 2;
    } else {
      strategy = dist::MultiWorkerMirroredStrategy::from_env({}, {.seed = 7});
    }
    std::string report;
    double rate = train(*strategy, data, batch, steps, block_steps, profile, &report);
    if (strategy->is_chief())
      fmt::print("examples_per_sec={:.1f}\nthreads_per_replica={}\n", rate,
                 strategy->threads_per_replica());
    fmt::print("{}", bench::prefix_lines(report, "profile "));
    return 0;
  }

  ::setenv("EST_JOB_TOKEN", dist::generate_job_token().c_str(), 1);
  if (profile) ::setenv("EST_STEP_PROFILE", "1", 1);
  std::string self = "/proc/self/exe";
  if (block_steps > steps) block_steps = steps;
  if (no_exchange && global_batch % 2 != 0)
    throw est::InvalidArgumentError("--no_exchange needs an even --global_batch");
  std::vector<std::string> common = {self,
                                     "--global_batch",
                                     std::to_string(global_batch),
                                     "--steps",
                                     std::to_string(steps),
                                     "--block_steps",
                                     std::to_string(block_steps)};
  if (profile) common.push_back("--profile");
  std::string dir = "/tmp/est_multi_worker_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<double> singles, workers, ratios;
  const std::string pair = no_exchange ? "two_alone" : "two_workers";
  for (int r = 0; r < rounds; ++r) {
    auto single_args = common;
    single_args.insert(single_args.end(), {"--role", "single"});
    int p0 = 20000 + (::getpid() * 7 + r * 2) % 20000;
    std::string cluster =
        fmt::format(R"({{"worker": ["127.0.0.1:{}", "127.0.0.1:{}"]}})", p0, p0 + 1);
    auto worker_args = common;
    worker_args.insert(worker_args.end(), {"--role", no_exchange ? "alone" : "worker"});
    auto tf_config = [&](int w) {
      return fmt::format(R"({{"cluster": {}, "task": {{"type": "worker", "index": {}}}}})", cluster,
                         w);
    };
    auto worker_log = [&](int w) { return dir + "/worker" + std::to_string(w) + ".log"; };
    std::string blocks_line;
    if (block_steps == 0) {
      wait_all({spawn(single_args, "", dir + "/single.log")});
      wait_all({spawn(worker_args, tf_config(0), worker_log(0)),
                spawn(worker_args, tf_config(1), worker_log(1))});
      singles.push_back(value_in(dir + "/single.log", "examples_per_sec"));
      double rate = value_in(worker_log(0), "examples_per_sec");  // the job's, from its chief
      if (no_exchange) rate += value_in(worker_log(1), "examples_per_sec");  // two of their own
      workers.push_back(rate);
    } else {
      int64_t blocks = steps / block_steps;
      bench::Interleaved times =
          run_interleaved(single_args, worker_args, tf_config, worker_log, dir, blocks);
      double examples = static_cast<double>(blocks * block_steps * global_batch);
      singles.push_back(examples / bench::Interleaved::seconds(times.a_ms));
      workers.push_back(examples / bench::Interleaved::seconds(times.b_ms));
      blocks_line = fmt::format("  block_ms one_process {:.1f} / {} {:.1f}\n",
                                fmt::join(times.a_ms, " "), pair, fmt::join(times.b_ms, " "));
    }
    ratios.push_back(workers.back() / singles.back());
    fmt::print("round {}: one_process {:.1f} {} {:.1f} ratio {:.3f}\n", r, singles.back(), pair,
               workers.back(), ratios.back());
    fmt::print("{}", blocks_line);
    if (profile) {
      bench::print_profile(dir + "/single.log", "single");
      for (int w = 0; w < 2; ++w)
        bench::print_profile(dir + "/worker" + std::to_string(w) + ".log",
                             "worker" + std::to_string(w));
    }
  }
  std::filesystem::remove_all(dir);
  fmt::print("global_batch={} steps={}\n", global_batch, steps);
  fmt::print("one_process threads=2 examples_per_sec={:.1f}\n", bench::median(singles));
  fmt::print("{} threads=1+1 examples_per_sec={:.1f}\n", pair, bench::median(workers));
  double low = *std::min_element(ratios.begin(), ratios.end());
  double high = *std::max_element(ratios.begin(), ratios.end());
  if (no_exchange)
    fmt::print(
        "ratio_without_exchange={:.3f} (the most an all-reduce could reach here; range "
        "{:.3f}-{:.3f})\n",
        bench::median(ratios), low, high);
  else
    fmt::print("ratio={:.3f} (target >= 0.97, every round > 0.9; range {:.3f}-{:.3f})\n",
               bench::median(ratios), low, high);
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
