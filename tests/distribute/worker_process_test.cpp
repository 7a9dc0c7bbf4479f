// Multi-worker jobs of real processes on 127.0.0.1 (free ports, the job token, bounded waits,
// every process killed by pid at the end): the Estimator under MultiWorkerMirroredStrategy
// trains like one process with the global batch and leaves identical variables on every task;
// a task that is killed, stopped, or fails is named on every other task, which exits non-zero
// within seconds instead of hanging; a call without the token is refused (checked with Python's
// grpcio, a client independent of ours).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "distribute/net/job_token.h"
#include "tests/command.h"
#include "tests/process_group.h"
#include "tests/skip.h"

namespace est::testing {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = EST_TEST_WORKER_PROGRAM;

struct Job {
  std::vector<std::string> addresses;  // [chief, worker 0, worker 1, ...]
  std::vector<std::string> tasks;      // "chief 0", "worker 0", ...
  std::vector<std::string> tf_configs;
};

// A chief and `workers` workers on free loopback ports, and an evaluator when asked.
Job make_job(int workers, bool evaluator = false) {
  Job job;
  std::string chief = "127.0.0.1:" + std::to_string(free_port());
  std::string worker_list;
  std::vector<std::string> worker_addresses;
  for (int i = 0; i < workers; ++i) {
    worker_addresses.push_back("127.0.0.1:" + std::to_string(free_port()));
    worker_list += (i ? ", " : "") + ("\"" + worker_addresses.back() + "\"");
  }
  // A listed evaluator tells the chief that it need not evaluate itself.
  std::string evaluator_address = "127.0.0.1:" + std::to_string(free_port());
  std::string cluster = "{\"chief\": [\"" + chief + "\"], \"worker\": [" + worker_list + "]" +
                        (evaluator ? ", \"evaluator\": [\"" + evaluator_address + "\"]" : "") +
                        "}";
  auto config = [&](const std::string& type, int index) {
    return "{\"cluster\": " + cluster + ", \"task\": {\"type\": \"" + type +
           "\", \"index\": " + std::to_string(index) + "}}";
  };
  job.addresses.push_back(chief);
  job.tasks.push_back("chief 0");
  job.tf_configs.push_back(config("chief", 0));
  for (int i = 0; i < workers; ++i) {
    job.addresses.push_back(worker_addresses[static_cast<size_t>(i)]);
    job.tasks.push_back("worker " + std::to_string(i));
    job.tf_configs.push_back(config("worker", i));
  }
  if (evaluator) {
    job.addresses.push_back(evaluator_address);
    job.tasks.push_back("evaluator 0");
    job.tf_configs.push_back(config("evaluator", 0));
  }
  return job;
}

// Starts every task of `job` with `args`; OMP threads 1 so that the tasks share 2 cores.
void start_job(ProcessGroup& group, const Job& job, const std::vector<std::string>& args,
               const std::string& token) {
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    std::vector<std::string> argv = {kWorker};
    argv.insert(argv.end(), args.begin(), args.end());
    for (std::string& arg : argv)  // per-task dump files
      if (arg.find("%TASK%") != std::string::npos)
        arg.replace(arg.find("%TASK%"), 6, std::to_string(t));
    group.start(argv, {{"TF_CONFIG", job.tf_configs[t]},
                       {"EST_JOB_TOKEN", token},
                       {"OMP_NUM_THREADS", "1"},
                       {"EST_LOG_LEVEL", "INFO"}});
  }
}

using Dump = std::map<std::string, std::vector<double>>;

Dump read_dump(const std::string& path) {
  Dump dump;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name, value;
    words >> name;
    while (words >> value) dump[name].push_back(std::strtod(value.c_str(), nullptr));
  }
  return dump;
}

}  // namespace

TEST_CASE("multi-process: 3 tasks train like one process on the global batch, identical") {
  ScratchDir dir;
  Job job = make_job(2);
  ProcessGroup group(dir.str());
  std::string token = distribute::generate_job_token();
  start_job(group, job,
            {"--model_dir", dir / "model", "--steps", "12", "--batch", "48", "--optimizer", "adam",
             "--dump", dir / "dump_%TASK%.txt"},
            token);
  auto codes = group.wait_all(120s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);
  // The reference: one process, no TF_CONFIG, the whole global batch.
  ProcessGroup reference(dir.str() + "/..");
  ProgramResult single = run_program(
      kWorker + " --model_dir " + dir / "single" + " --steps 12 --batch 48 --optimizer adam " +
          "--dump " + dir / "reference.txt",
      120);
  REQUIRE_MESSAGE(single.exit_code == 0, single.output);
  Dump expected = read_dump(dir / "reference.txt");
  REQUIRE(expected.count("dense/kernel/Adam") == 1);
  std::vector<Dump> dumps;
  for (size_t t = 0; t < job.tasks.size(); ++t)
    dumps.push_back(read_dump(dir / ("dump_" + std::to_string(t) + ".txt")));
  for (size_t t = 1; t < dumps.size(); ++t) CHECK(dumps[t] == dumps[0]);  // bitwise
  REQUIRE(dumps[0].size() == expected.size());
  for (const auto& [name, values] : expected) {
    CAPTURE(name);
    REQUIRE(dumps[0][name].size() == values.size());
    double worst = 0;
    for (size_t i = 0; i < values.size(); ++i)
      worst = std::max(worst, std::abs(dumps[0][name][i] - values[i]) / (1 + std::abs(values[i])));
    CHECK(worst <= 2e-5);
  }
  CHECK(dumps[0]["global_step"] == std::vector<double>{12});
  // Every task logs the job's loss (over every replica), the same number everywhere.
  auto loss_line = [&](size_t t) {
    std::string out = group.output(t);
    size_t at = out.find("loss = ");
    REQUIRE(at != std::string::npos);
    return out.substr(at, out.find('\n', at) - at);
  };
  CHECK(loss_line(0).find("step = 0") != std::string::npos);
  CHECK(loss_line(1) == loss_line(0));
  CHECK(loss_line(2) == loss_line(0));
  // Only the chief wrote model_dir; the workers' temporary directories are gone.
  CHECK(std::filesystem::exists(dir / "model/checkpoint"));
  CHECK_FALSE(std::filesystem::exists(dir / "model/workertemp_1"));
  CHECK_FALSE(std::filesystem::exists(dir / "model/workertemp_2"));
}

TEST_CASE("multi-process: a task that dies, stops or fails is named and the others exit") {
  struct Case {
    const char* fault;
    int victim;             // index into the job's tasks
    const char* expected;   // in every other task's output
  };
  for (Case c : {Case{"kill", 2, "worker 1 at "}, Case{"stop", 1, "worker 0 at "},
                 Case{"throw", 2, "injected failure at step 6"},
                 Case{"kill", 0, "chief 0 at "}}) {
    CAPTURE(c.fault);
    CAPTURE(c.victim);
    ScratchDir dir;
    Job job = make_job(2);
    ProcessGroup group(dir.str());
    start_job(group, job,
              {"--model_dir", dir / "model", "--steps", "100000", "--batch", "48", "--fault",
               c.fault, "--fault_task", job.tasks[static_cast<size_t>(c.victim)], "--fault_step",
               "6"},
              distribute::generate_job_token());
    // The victim's fault comes first (a kill or a stop shows as a signal, a stop only to us).
    auto victim = static_cast<size_t>(c.victim);
    if (std::string(c.fault) != "stop") {
      auto code = group.wait(victim, 60s);
      INFO(group.outputs());
      REQUIRE(code.has_value());
    } else {
      auto deadline = std::chrono::steady_clock::now() + 60s;
      while (group.output(victim).find("injecting fault") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
    }
    // Every other task stops within the bound (heartbeats: 5 s), non-zero, naming the cause.
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      if (t == victim) continue;
      auto code = group.wait(t, 20s);
      INFO(group.outputs());
      REQUIRE_MESSAGE(code.has_value(), job.tasks[t], " did not stop");
      CHECK(*code != 0);
      CHECK(group.output(t).find(c.expected) != std::string::npos);
    }
    group.kill_all();
  }
}

TEST_CASE("multi-process: the coordination service refuses calls without the job token") {
  if (run_program("/usr/bin/python3 -c 'import grpc'", 30).exit_code != 0)
    return skip("Python's grpcio is not installed (Debian: python3-grpcio)");
  ScratchDir dir;
  Job job = make_job(1);
  ProcessGroup group(dir.str());
  std::string token = distribute::generate_job_token();
  // Only the chief: it serves and waits for the worker that never comes.
  group.start({kWorker, "--model_dir", dir / "model"},
              {{"TF_CONFIG", job.tf_configs[0]}, {"EST_JOB_TOKEN", token}});
  std::string script = R"(
import grpc, sys, time
target, token = sys.argv[1], sys.argv[2]
channel = grpc.insecure_channel(target)
grpc.channel_ready_future(channel).result(timeout=30)
call = channel.unary_unary('/est.distribute.rpc.Coordination/Heartbeat',
                           request_serializer=lambda x: x, response_deserializer=lambda x: x)
for metadata in ([], [('est-job-token', 'not-the-token-0123456789')]):
    try:
        call(b'', metadata=metadata, timeout=10)
        print('ACCEPTED')
    except grpc.RpcError as error:
        print(error.code().name)
call(b'', metadata=[('est-job-token', token)], timeout=10)
print('WITH TOKEN OK')
)";
  std::ofstream(dir / "client.py") << script;
  ProgramResult result = run_program(
      "/usr/bin/python3 " + dir / "client.py" + " " + job.addresses[0] + " " + token, 60);
  group.kill_all();
  INFO(result.output);
  INFO(group.outputs());
  CHECK(result.output.find("UNAUTHENTICATED\nUNAUTHENTICATED\nWITH TOKEN OK") !=
        std::string::npos);
  CHECK(group.output(0).find("Refused a call from") != std::string::npos);
}

}  // namespace est::testing

namespace est::testing {

TEST_CASE("multi-process: a job killed at a random step resumes to the uninterrupted result") {
  // Adam (slots), dropout (random streams), a seeded shuffle per worker (input positions), a
  // checkpoint every 4 steps; one task is killed with SIGKILL at a random step, every task is
  // started again on the same model_dir, and the job must end bitwise where an uninterrupted
  // run ends (one OpenMP thread per task: the sums run in a fixed order).
  std::random_device random;
  unsigned seed = random();
  CAPTURE(seed);
  std::mt19937 pick(seed);
  constexpr int kSteps = 24;
  std::vector<std::string> common = {"--steps", std::to_string(kSteps), "--batch", "24",
                                     "--optimizer", "adam", "--save_steps", "4", "--dropout",
                                     "0.25", "--shuffle"};
  auto run_job = [&](const std::string& model_dir, const std::vector<std::string>& extra,
                     const std::string& dump_prefix) {
    ScratchDir logs;
    Job job = make_job(2);
    ProcessGroup group(logs.str());
    std::vector<std::string> args = {"--model_dir", model_dir};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    if (!dump_prefix.empty()) args.insert(args.end(), {"--dump", dump_prefix + "%TASK%.txt"});
    start_job(group, job, args, distribute::generate_job_token());
    auto codes = group.wait_all(120s);
    std::string outputs = group.outputs();
    group.kill_all();
    return std::pair(codes, outputs);
  };
  ScratchDir dir;
  auto [clean_codes, clean_log] = run_job(dir / "clean", {}, dir / "clean_");
  INFO(clean_log);
  for (auto code : clean_codes) REQUIRE(code == 0);

  int victim = static_cast<int>(pick() % 3);
  int kill_step = 5 + static_cast<int>(pick() % (kSteps - 6));
  const char* tasks[] = {"chief 0", "worker 0", "worker 1"};
  CAPTURE(tasks[victim]);
  CAPTURE(kill_step);
  auto [killed_codes, killed_log] =
      run_job(dir / "resumed",
              {"--fault", "kill", "--fault_task", tasks[victim], "--fault_step",
               std::to_string(kill_step)},
              "");
  INFO(killed_log);
  for (auto code : killed_codes) REQUIRE((code && *code != 0));  // the whole job stopped
  auto [resumed_codes, resumed_log] = run_job(dir / "resumed", {}, dir / "resumed_");
  INFO(resumed_log);
  for (auto code : resumed_codes) REQUIRE(code == 0);
  CHECK(resumed_log.find("Restoring parameters from") != std::string::npos);
  for (int t = 0; t < 3; ++t) {
    CAPTURE(t);
    Dump clean = read_dump(dir / ("clean_" + std::to_string(t) + ".txt"));
    Dump resumed = read_dump(dir / ("resumed_" + std::to_string(t) + ".txt"));
    REQUIRE(clean.count("dense/kernel/Adam") == 1);
    CHECK(resumed == clean);  // bitwise, every variable and slot, global_step included
  }
}

}  // namespace est::testing

namespace est::testing {

TEST_CASE("multi-process: chief, 2 workers and an evaluator through train_and_evaluate") {
  ScratchDir dir;
  Job job = make_job(2, /*evaluator=*/true);
  ProcessGroup group(dir.str());
  start_job(group, job,
            {"--model_dir", dir / "model", "--steps", "40", "--batch", "48", "--save_steps", "10",
             "--train_and_evaluate"},
            distribute::generate_job_token());
  auto codes = group.wait_all(180s);
  INFO(group.outputs());
  for (auto code : codes) REQUIRE(code == 0);
  // The evaluator evaluated the checkpoints and left after the one at max_steps; the chief
  // only trained (the cluster has an evaluator), the workers returned nothing.
  std::string evaluator = group.output(3);
  CHECK(evaluator.find("Exiting evaluation, global_step=40 >= train max_steps=40") !=
        std::string::npos);
  CHECK(evaluator.find("metrics: accuracy=") != std::string::npos);
  CHECK(evaluator.find("global_step=40\n") != std::string::npos);
  for (size_t t = 0; t < 3; ++t) {
    CHECK(group.output(t).find("metrics:") == std::string::npos);
    CHECK(group.output(t).find("Training with task_type = ") != std::string::npos);
  }
  CHECK(std::filesystem::exists(dir / "model/eval"));
}

TEST_CASE("multi-process: the evaluator's death does not stop training") {
  ScratchDir dir;
  Job job = make_job(1, /*evaluator=*/true);
  ProcessGroup group(dir.str());
  start_job(group, job,
            {"--model_dir", dir / "model", "--steps", "3000", "--batch", "48", "--save_steps", "5",
             "--train_and_evaluate"},
            distribute::generate_job_token());
  // Kill the evaluator as soon as it has evaluated once, while the others train on.
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (group.output(2).find("Finished evaluation") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  group.signal(2, SIGKILL);
  INFO(group.outputs());
  REQUIRE(group.wait(2, 10s) == -SIGKILL);
  REQUIRE_FALSE(group.wait(0, 0ms).has_value());  // training was still running
  auto chief = group.wait(0, 120s), worker = group.wait(1, 120s);
  CHECK(chief == 0);
  CHECK(worker == 0);
}

}  // namespace est::testing

namespace est::testing {

TEST_CASE("multi-process: a second job on the same model_dir fails at once, naming the first") {
  ScratchDir dir;
  Job first = make_job(1), second = make_job(1);
  ProcessGroup late(dir.str());
  std::filesystem::create_directories(dir / "a");
  ProcessGroup first_group(dir / "a");
  start_job(first_group, first, {"--model_dir", dir / "model", "--steps", "100000"},
            distribute::generate_job_token());
  // Wait until the first job's chief trains (it holds the lock from then on).
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (first_group.output(0).find("loss = ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  REQUIRE(first_group.output(0).find("loss = ") != std::string::npos);
  start_job(late, second, {"--model_dir", dir / "model", "--steps", "100000"},
            distribute::generate_job_token());
  auto codes = late.wait_all(30s);
  INFO(late.outputs());
  for (auto code : codes) {
    REQUIRE(code.has_value());
    CHECK(*code != 0);
  }
  std::string pid = std::to_string(first_group.pid(0));
  CHECK(late.output(0).find(pid) != std::string::npos);  // the chief names the holder
  CHECK(late.output(1).find("chief 0") != std::string::npos);  // its worker names the chief
  // The first job is unaffected.
  CHECK_FALSE(first_group.wait(0, 0ms).has_value());
  CHECK_FALSE(first_group.wait(1, 0ms).has_value());
  first_group.kill_all();
}

}  // namespace est::testing
