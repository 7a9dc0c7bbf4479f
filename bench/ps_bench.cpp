// Parameter servers on loopback: 2 worker processes and 1 ps task training the tutorial CNN
// asynchronously (ParameterServerStrategy, each worker 1 thread, its own batch each step)
// against one process with 2 threads at the same per-step batch, both stepping through
// replica.run_train_op on in-memory Fashion-MNIST batches. Figures: the job's examples/s (both
// workers together) against one process's, and the bytes a worker moves per step (its push and
// pull, frames included) against 2 x the variables' bytes (one copy of the gradients out, one of
// the values back: the least a step that pushes every gradient and pulls every value can move).
//
//   ps_bench [--batch 64] [--steps 200] [--rounds 3] [--block_steps 50]
//            [--push-ahead-bytes 65536] [--sync_replicas 2] [--profile]
// --sync_replicas R: the job trains synchronously (SyncReplicasOptimizer's semantics, R = 2
// gradients averaged per step, num_tokens = 0: lock-step), each step then three round trips
// (push, token, pull) and a wait for the slower worker; no gradient is pushed ahead then.
// Each round runs fresh jobs (ps 0, worker 0, worker 1): one whose workers send every gradient
// with the step's request after the backward pass (push_ahead_bytes 0, before issue 18's
// overlap), and (asynchronous only) one whose workers send gradients of at least
// --push-ahead-bytes as the backward pass completes them (ParameterServerOptions's default).
// Each job is started together with a fresh one-process run and the two train in turns,
// `block_steps` steps at a time (A B B A ..., bench/block_gate.h: both rates over the same
// seconds of the host; a job's block lasts until both its workers are done), `steps` steps per
// worker after one untimed block (the 20 warm-up steps and the first block);
// --block_steps 0 runs one process first, then the jobs, one after the other, as before. The
// figures are the medians of the rounds. Lines: `one_process examples_per_sec=...`, then per
// job kind `ps_job push_ahead=... examples_per_sec=... ratio=...` and `bytes_per_step=...
// variables_bytes=... bytes_ratio=...`, `wait_us_per_step=...` (how long the chief waited for
// the replies once its requests were sent), and `ahead_vs_batched=...` (the two jobs' ratios,
// round by round; their examples/s when not interleaved). Each round's line is followed by
// its blocks' times (ms).
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <est/distribute/distribute.h>
#include <est/distribute/net/job_token.h>
#include <est/distribute/ps/parameter_server_strategy.h>
#include <est/distribute/ps/ps_client.h>
#include <est/distribute/ps/ps_server.h>
#include <est/nn/nn.h>

#include "bench/block_gate.h"
#include "bench/child_processes.h"
#include "bench/fashion_mnist_memory.h"
#include "bench/ps_profile.h"
#include "examples/cnn_model.h"

namespace {

using est::Tensor;
namespace dist = est::distribute;

struct Timed {
  double examples_per_sec = 0;
  double variables_bytes = 0;
  int64_t steps_run = 0;  // warm-up included
};

// `steps` timed steps of batch `batch` under `strategy` (one local replica); with `profile`,
// `report` gets their split (bench/ps_profile.h). With `block_steps` > 0 the process is gated
// (bench/block_gate.h) and times the blocks of `block_steps` steps the parent lets it run.
Timed train(dist::Strategy& strategy, const bench::InMemoryData& data, int64_t batch, int64_t steps,
            int64_t block_steps, int64_t first_row, bool profile, std::string* report) {
  bench::StepTimer timer(profile);
  int64_t batches = data.images.dim(0) / batch;
  double scale = 1.0 / static_cast<double>(batch);
  auto step = [&](int64_t s) {
    timer.step_begins();
    Tensor images = Tensor::empty({batch, 28, 28, 1});
    Tensor labels = Tensor::empty({batch}, est::DType::kI64);
    bench::copy_rows(data, ((first_row / batch + s) % batches) * batch, images, labels);
    strategy.run(
        [&](dist::ReplicaContext& replica) {
          est::ModelContext& ctx = replica.model_context();
          timer.forward_begins();
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
        {est::data::Element(est::Features{{"image", images}}, labels)});
    timer.step_ends();
  };
  Timed timed;
  if (block_steps > 0) {
    bench::GatedRun run = bench::run_gated_blocks(20, block_steps, step, [&] { timer.start(); });
    steps = run.timed_steps;
    timed.examples_per_sec = static_cast<double>(steps * batch) / run.seconds;
  } else {
    for (int64_t s = 0; s < 20; ++s) step(s);  // warm-up
    timer.start();
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) step(20 + s);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timed.examples_per_sec = static_cast<double>(steps * batch) / seconds;
  }
  if (profile) *report = timer.report(steps);
  timed.steps_run = steps + 20;
  for (const est::nn::Variable& v : strategy.store(0).trainable_variables())
    timed.variables_bytes += static_cast<double>(v.value.nbytes());
  return timed;
}

// One job (ps task, chief, worker) and a one-process run started together; the workers and the
// one process train in turns, block by block (bench/block_gate.h). On an error every child is
// killed and the logs kept.
template <class Config>
bench::Interleaved run_interleaved(const std::vector<std::string>& single_args,
                                   const std::vector<std::string>& ps_args,
                                   const std::vector<std::string>& worker_args,
                                   const Config& tf_config, const std::string& dir,
                                   int64_t blocks) {
  try {
    return bench::interleave_round(
        [&](std::vector<bench::GatedChild>& gated, std::vector<bench::GatedChild>& others) {
          others.push_back({.pid = bench::spawn(ps_args, tf_config("ps"), dir + "/ps.log")});
          gated.push_back(bench::spawn_gated(single_args, "", dir + "/single.log"));
          gated.push_back(bench::spawn_gated(worker_args, tf_config("chief"), dir + "/chief.log"));
          gated.push_back(
              bench::spawn_gated(worker_args, tf_config("worker"), dir + "/worker.log"));
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
  int64_t batch = 64, steps = 200, block_steps = 50;
  int rounds = 3;
  size_t push_ahead_bytes = size_t{64} << 10;
  std::string role;
  CLI::App app("2 workers + 1 ps (async) against 1 process x 2 threads (tutorial CNN).",
               "ps_bench");
  app.add_option("--batch", batch, "each worker's batch per step")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per worker")->capture_default_str();
  app.add_option("--rounds", rounds, "runs of each")->capture_default_str();
  app.add_option("--block_steps", block_steps,
                 "interleave the one process and each job in blocks of this many steps (A B B A "
                 "...; 0: one run after the other)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--push-ahead-bytes", push_ahead_bytes,
                 "the second job's workers send gradients of this size or more ahead")
      ->capture_default_str();
  int sync_replicas = 0;
  app.add_option("--sync_replicas", sync_replicas,
                 "train synchronously, averaging this many gradients per step (0: async)")
      ->capture_default_str();
  bool profile = false;
  app.add_flag("--profile", profile,
               "print each run's split of a step (EST_STEP_PROFILE=1 for the children)");
  app.add_option("--role", role, "internal: single, ps or worker")->group("");
  CLI11_PARSE(app, argc, argv);

  if (role == "ps") {
    est::distribute::TfConfig config = est::distribute::parse_tf_config(std::getenv("TF_CONFIG"));
    dist::PsServer server({.address = config.cluster.task_address(dist::TaskType::kPs, 0),
                           .token = dist::job_token_from_environment(),
                           .task_index = 0,
                           .num_workers = 2,
                           .optimizer = est::optim::sgd(1e-3)});
    bench::ThreadWatch watch(profile);  // the connection threads end before join() returns
    server.join();
    if (profile)
      fmt::print("{}", bench::prefix_lines(bench::ps_task_report(watch.stop()), "profile "));
    return 0;
  }
  if (!role.empty()) {
    bench::InMemoryData data = bench::load_fashion_mnist("train");
    std::shared_ptr<dist::Strategy> strategy;
    std::shared_ptr<dist::ParameterServerStrategy> ps;
    if (role == "single") {
      strategy = std::make_shared<dist::OneDeviceStrategy>("/cpu:0", 7);
    } else {
      std::optional<dist::SyncReplicasOptions> sync;
      if (sync_replicas > 0)
        sync = dist::SyncReplicasOptions{.replicas_to_aggregate = sync_replicas, .num_tokens = 0};
      ps = dist::ParameterServerStrategy::from_env(
          {.push_ahead_bytes = push_ahead_bytes, .sync_replicas = sync, .seed = 7});
      strategy = ps;
    }
    std::string report;
    Timed timed = train(*strategy, data, batch, steps, block_steps,
                        ps ? ps->input_pipeline_id() * 30000 : 0, profile, &report);
    fmt::print("{}", bench::prefix_lines(report, "profile "));
    fmt::print("examples_per_sec={:.1f}\nvariables_bytes={:.0f}\n", timed.examples_per_sec,
               timed.variables_bytes);
    if (ps) {
      double steps_run = static_cast<double>(timed.steps_run);
      fmt::print("bytes_per_step={:.0f}\n",
                 static_cast<double>(ps->bytes_sent() + ps->bytes_received()) / steps_run);
      fmt::print("wait_us_per_step={:.1f}\n", ps->ps_client()->seconds_waiting() * 1e6 / steps_run);
    }
    return 0;
  }

  ::setenv("EST_JOB_TOKEN", dist::generate_job_token().c_str(), 1);
  if (block_steps > steps) block_steps = steps;
  std::vector<std::string> common = {"/proc/self/exe",
                                     "--batch",
                                     std::to_string(batch),
                                     "--steps",
                                     std::to_string(steps),
                                     "--block_steps",
                                     std::to_string(block_steps),
                                     "--sync_replicas",
                                     std::to_string(sync_replicas)};
  if (profile) {
    ::setenv("EST_STEP_PROFILE", "1", 1);
    common.push_back("--profile");
  }
  std::string dir = "/tmp/est_ps_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<double> singles, variables;
  // Batched, then (asynchronous only: a synchronous step does not push ahead) ahead.
  const std::vector<size_t> kinds =
      sync_replicas > 0 ? std::vector<size_t>{0} : std::vector<size_t>{0, push_ahead_bytes};
  std::vector<std::vector<double>> jobs(2), ratios(2), bytes(2), waits(2);
  std::vector<double> ahead_vs_batched;
  for (int r = 0; r < rounds; ++r) {
    auto single_args = common;
    single_args.insert(single_args.end(), {"--role", "single"});
    double single = 0;
    if (block_steps == 0) {
      wait_all({spawn(single_args, "", dir + "/single.log")});
      single = value_in(dir + "/single.log", "examples_per_sec");
      singles.push_back(single);
      if (profile) bench::print_profile(dir + "/single.log", fmt::format("round {} single", r));
    }
    for (size_t k = 0; k < kinds.size(); ++k) {
      int p0 = 20000 + (::getpid() * 7 + r * 6 + static_cast<int>(k) * 3) % 20000;
      std::string cluster = fmt::format(
          R"({{"chief": ["127.0.0.1:{}"], "worker": ["127.0.0.1:{}"], "ps": ["127.0.0.1:{}"]}})",
          p0, p0 + 1, p0 + 2);
      auto tf_config = [&](const char* type) {
        return fmt::format(R"({{"cluster": {}, "task": {{"type": "{}", "index": 0}}}})", cluster,
                           type);
      };
      auto ps_args = common;
      ps_args.insert(ps_args.end(), {"--role", "ps"});
      auto worker_args = common;
      worker_args.insert(worker_args.end(),
                         {"--role", "worker", "--push-ahead-bytes", std::to_string(kinds[k])});
      double job = 0;
      std::string blocks_line;
      if (block_steps == 0) {
        wait_all({spawn(ps_args, tf_config("ps"), dir + "/ps.log"),
                  spawn(worker_args, tf_config("chief"), dir + "/chief.log"),
                  spawn(worker_args, tf_config("worker"), dir + "/worker.log")});
        job = value_in(dir + "/chief.log", "examples_per_sec") +
              value_in(dir + "/worker.log", "examples_per_sec");
      } else {
        int64_t blocks = steps / block_steps;
        bench::Interleaved times =
            run_interleaved(single_args, ps_args, worker_args, tf_config, dir, blocks);
        double examples = static_cast<double>(blocks * block_steps * batch);
        single = examples / bench::Interleaved::seconds(times.a_ms);
        singles.push_back(single);
        // Both workers ran `examples` each; a block lasts until the slower one is done.
        job = 2 * examples / bench::Interleaved::seconds(times.b_ms);
        blocks_line = fmt::format("  block_ms one_process {:.1f} / job {:.1f}\n",
                                  fmt::join(times.a_ms, " "), fmt::join(times.b_ms, " "));
        if (profile)
          bench::print_profile(dir + "/single.log",
                               fmt::format("round {} push_ahead={} single", r, kinds[k]));
      }
      jobs[k].push_back(job);
      ratios[k].push_back(job / single);
      bytes[k].push_back(value_in(dir + "/chief.log", "bytes_per_step"));
      waits[k].push_back(value_in(dir + "/chief.log", "wait_us_per_step"));
      if (k == 0) variables.push_back(value_in(dir + "/chief.log", "variables_bytes"));
      fmt::print(
          "round {}: one_process {:.1f} ps_job push_ahead={} {:.1f} ratio {:.3f} "
          "bytes_per_step {:.0f} wait_us_per_step {:.0f}\n",
          r, single, kinds[k], job, ratios[k].back(), bytes[k].back(), waits[k].back());
      fmt::print("{}", blocks_line);
      if (profile)
        for (const char* who : {"chief", "worker", "ps"})
          bench::print_profile(dir + "/" + who + ".log",
                               fmt::format("round {} push_ahead={} {}", r, kinds[k], who));
    }
    // Interleaved, each job is measured against its own one-process run.
    if (kinds.size() == 2)
      ahead_vs_batched.push_back(block_steps > 0 ? ratios[1].back() / ratios[0].back()
                                                 : jobs[1].back() / jobs[0].back());
  }
  std::filesystem::remove_all(dir);
  double model = bench::median(variables);
  fmt::print("batch={} steps={}\n", batch, steps);
  fmt::print("one_process threads=2 examples_per_sec={:.1f}\n", bench::median(singles));
  for (size_t k = 0; k < kinds.size(); ++k) {
    double moved = bench::median(bytes[k]);
    fmt::print(
        "ps_job workers=2x1 ps=1{} push_ahead={} examples_per_sec={:.1f} ratio={:.3f} (range "
        "{:.3f}-{:.3f})\n",
        sync_replicas > 0 ? fmt::format(" sync_replicas={}", sync_replicas) : "", kinds[k],
        bench::median(jobs[k]), bench::median(ratios[k]),
        *std::min_element(ratios[k].begin(), ratios[k].end()),
        *std::max_element(ratios[k].begin(), ratios[k].end()));
    fmt::print(
        "push_ahead={} bytes_per_step={:.0f} variables_bytes={:.0f} bytes_ratio={:.3f} (vs 2 x "
        "variables)\n",
        kinds[k], moved, model, moved / (2 * model));
    fmt::print("push_ahead={} wait_us_per_step={:.1f} (the chief's wait for the replies)\n",
               kinds[k], bench::median(waits[k]));
  }
  if (kinds.size() == 2)
    fmt::print("ahead_vs_batched={:.3f} (range {:.3f}-{:.3f})\n", bench::median(ahead_vs_batched),
               *std::min_element(ahead_vs_batched.begin(), ahead_vs_batched.end()),
               *std::max_element(ahead_vs_batched.begin(), ahead_vs_batched.end()));
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
