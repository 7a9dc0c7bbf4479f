// est-launch on one machine, run as a program with fake_task as its tasks: TF_CONFIG and the
// token of each task, prefixed output, a failing task stopping the job, stop signals passed on,
// SIGKILL after the grace period, restarts, the evaluator's failure, and usage errors.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "distribute/cluster/tf_config.h"
#include "tests/tools/launcher.h"

using namespace est::testing;
using namespace est::distribute;

TEST_CASE("each task gets its own TF_CONFIG (chief, workers, evaluator) and the same token") {
  LaunchRun run;
  run.start({"-n", "3", "--evaluator"}, {"config"}, {{"EST_JOB_TOKEN_FILE", "/nonexistent"}});
  REQUIRE_MESSAGE(run.wait() == 0, run.output());
  std::vector<ConfigLine> lines = config_lines(run.output());
  REQUIRE_MESSAGE(lines.size() == 4, run.output());
  std::set<std::string> tasks, tokens;
  std::optional<ClusterSpec> cluster;
  for (const ConfigLine& line : lines) {
    CAPTURE(line.tf_config);
    CHECK(line.prefix == line.task);  // the output's prefix names the task that wrote it
    TfConfig config = parse_tf_config(line.tf_config);
    REQUIRE(config.task.has_value());
    CHECK(fmt::format("{}:{}", config.task->type, config.task->index) == line.task);
    if (cluster) CHECK(config.cluster == *cluster);
    cluster = config.cluster;
    tasks.insert(line.task);
    tokens.insert(line.token);
    CHECK(line.token_file.empty());  // the library refuses a token and a token file together
    CHECK(line.omp == "passive");
  }
  CHECK(tasks == std::set<std::string>{"chief:0", "worker:0", "worker:1", "evaluator:0"});
  REQUIRE(tokens.size() == 1);
  CHECK(tokens.begin()->size() >= 16);
  // TensorFlow's layout with a chief; the evaluator is listed, so the chief knows of it.
  CHECK(cluster->jobs() ==
        std::vector<TaskType>{TaskType::kChief, TaskType::kEvaluator, TaskType::kWorker});
  CHECK(cluster->num_tasks(TaskType::kChief) == 1);
  CHECK(cluster->num_tasks(TaskType::kEvaluator) == 1);
  CHECK(cluster->num_tasks(TaskType::kWorker) == 2);
  std::set<int> ports;
  for (const auto& [type, addresses] : cluster->as_map())
    for (const std::string& address : addresses) {
      HostPort host_port = parse_host_port(address, "test");
      CHECK(host_port.host == "127.0.0.1");
      ports.insert(host_port.port);
    }
  CHECK(ports.size() == 4);
}

TEST_CASE("OMP_WAIT_POLICY: passive for several local tasks, the user's value kept, unset alone") {
  {
    LaunchRun run;
    run.start({"-n", "2"}, {"config"}, {{"OMP_WAIT_POLICY", "ACTIVE"}});
    REQUIRE(run.wait() == 0);
    std::vector<ConfigLine> lines = config_lines(run.output());
    REQUIRE(lines.size() == 2);
    for (const ConfigLine& line : lines) CHECK(line.omp == "ACTIVE");
  }
  {
    ::unsetenv("OMP_WAIT_POLICY");
    LaunchRun run;
    run.start({"-n", "1"}, {"config"});
    REQUIRE(run.wait() == 0);
    std::vector<ConfigLine> lines = config_lines(run.output());
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].task == "chief:0");
    CHECK(lines[0].omp.empty());
    CHECK(parse_tf_config(lines[0].tf_config).cluster.num_tasks() == 1);
  }
}

TEST_CASE("every output line carries its task's prefix, the last partial line too") {
  LaunchRun run;
  run.start({"-n", "2"}, {"say:first line", "err:on stderr", "say:", "partial:no newline"});
  REQUIRE(run.wait() == 0);
  std::string output = run.output();
  for (const std::string task : {"chief:0", "worker:0"}) {
    CHECK_MESSAGE(contains(output, "[" + task + "] first line\n"), output);
    CHECK(contains(output, "[" + task + "] on stderr\n"));
    CHECK(contains(output, "[" + task + "] \n"));  // an empty line keeps its prefix
    CHECK(contains(output, "[" + task + "] no newline\n"));
  }
  // Every line is either a task's (prefixed) or the launcher's own.
  for (const std::string& line : lines_of(output))
    CHECK_MESSAGE((line.starts_with("[chief:0] ") || line.starts_with("[worker:0] ") ||
                   line.starts_with("INFO:est-launch:")),
                  line);
}

TEST_CASE("a failing task stops the others and est-launch exits with its status") {
  SUBCASE("exit code") {
    LaunchRun run;
    run.start({"-n", "3", "--grace-period", "20"},
              {"barrier:" + run.dir(), "worker:1@exit:3", "wait-signal"});
    CHECK(run.wait() == 3);
    std::string output = run.output();
    CHECK_MESSAGE(contains(output, "ERROR:est-launch:worker 1 exited with status 3; stopping"),
                  output);
    CHECK(contains(output, "chief:0 got SIGTERM"));
    CHECK(contains(output, "worker:0 got SIGTERM"));
    CHECK(contains(output, "chief 0 exited with status 143 (killed by SIGTERM)"));
    CHECK(contains(output, "ERROR:est-launch:the job failed: worker 1 exited with status 3"));
  }
  SUBCASE("killed by a signal: 128 + N") {
    LaunchRun run;
    run.start({"-n", "2"}, {"barrier:" + run.dir(), "chief:0@kill:9", "wait-signal"});
    CHECK(run.wait() == 137);
    CHECK_MESSAGE(contains(run.output(), "chief 0 exited with status 137 (killed by SIGKILL)"),
                  run.output());
    CHECK(contains(run.output(), "worker:0 got SIGTERM"));
  }
  SUBCASE("a program that does not exist: 127 before anything starts") {
    LaunchRun run;
    run.start_raw({kEstLaunch, "-n", "2", "--", "/nonexistent/program"});
    CHECK(run.wait() == 127);
    CHECK(contains(run.output(), "cannot run '/nonexistent/program'"));
  }
}

TEST_CASE("SIGTERM and SIGINT to est-launch reach every task, and est-launch ends by them") {
  for (int signal : {SIGTERM, SIGINT}) {
    CAPTURE(signal);
    LaunchRun run;
    run.start({"-n", "2", "--evaluator"}, {"say:ready", "wait-signal"});
    run.wait_for_output("] ready", 3);
    run.signal(signal);
    CHECK(run.wait() == -signal);
    std::string name = signal == SIGTERM ? "SIGTERM" : "SIGINT";
    std::string output = run.output();
    for (const std::string task : {"chief:0", "worker:0", "evaluator:0"})
      CHECK_MESSAGE(contains(output, task + " got " + name), output);
    CHECK(contains(output, "received " + name + "; passing it to every task"));
    CHECK_FALSE(contains(output, "killed by SIGKILL"));
    CHECK(contains(output, "exited with status " + std::to_string(128 + signal)));
  }
}

TEST_CASE("a task that ignores SIGTERM is killed after the grace period") {
  LaunchRun run;
  run.start({"-n", "2", "--grace-period", "0.5"},
            {"worker:0@ignore-stop", "barrier:" + run.dir(), "chief:0@exit:1", "wait-signal"});
  CHECK(run.wait() == 1);
  std::string output = run.output();
  CHECK_MESSAGE(contains(output, "worker:0 got SIGTERM (ignored)"), output);
  CHECK(contains(output, "worker 0 did not end within 0.5 s of SIGTERM; killing it (SIGKILL)"));
  CHECK(contains(output, "worker 0 exited with status 137 (killed by SIGKILL)"));
  CHECK(contains(output, "the job failed: chief 0 exited with status 1"));
}

TEST_CASE("a second stop signal kills every task at once") {
  LaunchRun run;
  run.start({"-n", "2", "--grace-period", "50"}, {"ignore-stop", "say:ready", "wait-signal"});
  run.wait_for_output("] ready", 2);
  run.signal(SIGINT);
  run.wait_for_output("got SIGINT (ignored)", 2);
  run.signal(SIGINT);
  CHECK(run.wait() == -SIGINT);
  CHECK_MESSAGE(contains(run.output(), "received SIGINT again; killing every task (SIGKILL)"),
                run.output());
  CHECK(count_of(run.output(), "exited with status 137 (killed by SIGKILL)") == 2);
}

TEST_CASE("--max-restarts restarts every task, with a new token, and succeeds") {
  LaunchRun run;
  std::string records = run.dir() + "/records";
  run.start({"-n", "3", "--max-restarts", "2"}, {"record:" + records, "barrier:" + run.dir(),
                                                 "worker:1@fail-once:" + run.dir() + "/marker:7"});
  REQUIRE_MESSAGE(run.wait() == 0, run.output());
  std::string output = run.output();
  CHECK_MESSAGE(contains(output,
                         "WARNING:est-launch:restarting the job (attempt 2 of 3): worker "
                         "1 exited with status 7"),
                output);
  CHECK(contains(output, "starting 3 tasks (attempt 1 of 3)"));
  CHECK(contains(output, "starting 3 tasks (attempt 2 of 3)"));
  CHECK_FALSE(contains(output, "attempt 3 of 3"));
  std::ifstream in(records);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<ConfigLine> starts = config_lines(text);
  REQUIRE(starts.size() == 6);  // every task, twice
  std::map<std::string, std::set<std::string>> tasks_by_token;
  for (const ConfigLine& start : starts) tasks_by_token[start.token].insert(start.task);
  REQUIRE(tasks_by_token.size() == 2);
  for (const auto& [token, tasks] : tasks_by_token)
    CHECK(tasks == std::set<std::string>{"chief:0", "worker:0", "worker:1"});
}

TEST_CASE("--max-restarts gives up after K restarts with the last failure's status") {
  LaunchRun run;
  std::string records = run.dir() + "/records";
  run.start({"-n", "2", "--max-restarts", "2"},
            {"record:" + records, "barrier:" + run.dir(), "worker:0@exit:5", "wait-signal"});
  CHECK(run.wait() == 5);
  std::string output = run.output();
  CHECK_MESSAGE(contains(output,
                         "restarting the job (attempt 3 of 3): worker 0 exited with "
                         "status 5"),
                output);
  CHECK(contains(output,
                 "ERROR:est-launch:giving up after 2 restarts: worker 0 exited with "
                 "status 5"));
  std::ifstream in(records);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(config_lines(text).size() == 6);  // 3 attempts of 2 tasks
}

TEST_CASE("a stop signal is not a failure: no restart") {
  LaunchRun run;
  run.start({"-n", "2", "--max-restarts", "3"}, {"say:ready", "wait-signal"});
  run.wait_for_output("] ready", 2);
  run.signal(SIGTERM);
  CHECK(run.wait() == -SIGTERM);
  CHECK_FALSE(contains(run.output(), "restarting"));
}

TEST_CASE("the evaluator's failure does not stop the workers") {
  LaunchRun run;
  std::string evaluator_pid = run.dir() + "/evaluator.pid";
  run.start({"-n", "2", "--evaluator"},
            {"evaluator:0@pidfile:" + evaluator_pid, "evaluator:0@exit:4",
             "await-reaped:" + evaluator_pid, "say:finished"});
  CHECK(run.wait() == 0);
  std::string output = run.output();
  CHECK_MESSAGE(contains(output,
                         "WARNING:est-launch:evaluator 0 exited with status 4; training "
                         "goes on without evaluation"),
                output);
  CHECK(contains(output, "[chief:0] finished"));
  CHECK(contains(output, "[worker:0] finished"));
  CHECK_FALSE(contains(output, "got SIGTERM"));
  CHECK(contains(output,
                 "the job finished (without evaluation: evaluator 0 exited with "
                 "status 4)"));
}

TEST_CASE("training that ends waits for the evaluator to end on its own") {
  LaunchRun run;
  run.start({"-n", "1", "--evaluator"},
            {"barrier:" + run.dir(), "evaluator:0@await-reaped:" + run.dir() + "/chief.pid",
             "chief:0@pidfile:" + run.dir() + "/chief.pid", "evaluator:0@say:evaluated"});
  CHECK(run.wait() == 0);
  std::string output = run.output();
  CHECK_MESSAGE(contains(output, "training finished; waiting for evaluator 0 to end"), output);
  CHECK(contains(output, "[evaluator:0] evaluated"));
  CHECK_FALSE(contains(output, "got SIGTERM"));
}

TEST_CASE("--ps M: ps tasks listed in every TF_CONFIG; training waits for them to end") {
  LaunchRun run;
  run.start({"-n", "2", "--ps", "2"},
            {"config", "chief:0@pidfile:" + run.dir() + "/chief.pid",
             "ps:1@await-reaped:" + run.dir() + "/chief.pid", "ps:1@say:served"});
  REQUIRE_MESSAGE(run.wait() == 0, run.output());
  std::string output = run.output();
  std::set<std::string> tasks;
  for (const ConfigLine& line : config_lines(output)) {
    tasks.insert(line.task);
    ClusterSpec cluster = parse_tf_config(line.tf_config).cluster;
    CHECK(cluster.num_tasks(TaskType::kPs) == 2);
    CHECK(cluster.num_tasks(TaskType::kChief) == 1);
    CHECK(cluster.num_tasks(TaskType::kWorker) == 1);
  }
  CHECK(tasks == std::set<std::string>{"chief:0", "worker:0", "ps:0", "ps:1"});
  CHECK(contains(output, "[ps:1] served"));
  CHECK_FALSE(contains(output, "got SIGTERM"));
}

TEST_CASE("a ps task that fails stops the training tasks") {
  LaunchRun run;
  // The ps task fails once both training tasks run (their signal handlers are installed before
  // the barrier), so that each is stopped by est-launch, not killed before it can say so.
  run.start({"-n", "2", "--ps", "1", "--grace-period", "5"},
            {"barrier:" + run.dir(), "ps:0@exit:6", "wait-signal"});
  CHECK(run.wait() == 6);
  std::string output = run.output();
  CHECK_MESSAGE(contains(output, "ps 0 exited with status 6; stopping the other tasks"), output);
  CHECK(contains(output, "[chief:0] chief:0 got SIGTERM"));
  CHECK(contains(output, "[worker:0] worker:0 got SIGTERM"));
}

TEST_CASE("usage: --help, flags before the program, errors exit 2, --generate-token") {
  ProgramResult help = run_program(kEstLaunch + " --help", 30);
  CHECK(help.exit_code == 0);
  for (const std::string flag : {"--num-workers", "--evaluator", "--max-restarts", "--grace-period",
                                 "--slurm", "--port-base", "--generate-token"})
    CHECK_MESSAGE(contains(help.output, flag), flag);

  // The program's own flags (even est-launch's names) belong to the program.
  LaunchRun run;
  run.start_raw({kEstLaunch, "-n", "1", kFakeTask, "say:-n", "say:--evaluator"});
  CHECK(run.wait() == 0);
  CHECK(contains(run.output(), "[chief:0] -n\n[chief:0] --evaluator\n"));
  CHECK_FALSE(contains(run.output(), "evaluator:0"));

  ProgramResult unknown = run_program(kEstLaunch + " -n 2 --bogus -- " + kFakeTask, 30);
  CHECK(unknown.exit_code == 2);
  CHECK(contains(unknown.output, "--bogus"));
  ProgramResult no_count = run_program(kEstLaunch + " -- " + kFakeTask, 30);
  CHECK(no_count.exit_code == 2);
  CHECK(contains(no_count.output, "--num-workers"));
  ProgramResult no_program = run_program(kEstLaunch + " -n 2", 30);
  CHECK(no_program.exit_code == 2);
  ProgramResult zero = run_program(kEstLaunch + " -n 0 -- " + kFakeTask, 30);
  CHECK(zero.exit_code == 2);
  ProgramResult both = run_program(kEstLaunch + " -n 2 --slurm -- " + kFakeTask, 30);
  CHECK(both.exit_code == 2);

  ProgramResult token = run_program(kEstLaunch + " --generate-token", 30);
  CHECK(token.exit_code == 0);
  CHECK_MESSAGE(std::regex_match(token.output, std::regex("[0-9a-f]{32}\n")), token.output);
  CHECK(run_program(kEstLaunch + " --generate-token", 30).output != token.output);
}
