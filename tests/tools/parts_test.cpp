// est-launch's parts in-process: line prefixing, exit statuses, the local job's layout, free
// ports, a task's environment, and the program lookup.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "ops/error.h"
#include "tools/launch/child_process.h"
#include "tools/launch/exit_status.h"
#include "tools/launch/job_plan.h"
#include "tools/launch/line_prefixer.h"
#include "tools/launch/supervisor.h"

using namespace est;
using namespace est::launch;
using est::distribute::TaskSpec;
using est::distribute::TaskType;

namespace {

struct Collected {
  std::vector<std::string> lines;
  LinePrefixer::Sink sink() {
    return [this](std::string_view line) { lines.emplace_back(line); };
  }
};

std::vector<std::string> prefix_all(const std::vector<std::string>& chunks, size_t max_line) {
  Collected out;
  LinePrefixer prefixer("[w:1] ", out.sink(), max_line);
  for (const std::string& chunk : chunks) prefixer.feed(chunk);
  prefixer.finish();
  prefixer.finish();  // idempotent
  return out.lines;
}

ExitStatus status_of_child(void (*body)()) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return ExitStatus::from_wait_status(status);
}

}  // namespace

TEST_CASE("LinePrefixer passes on whole lines, prefixed, however the bytes arrive") {
  std::string text = "alpha\n\nbeta gamma\nlast without newline";
  std::vector<std::string> expected = {"[w:1] alpha\n", "[w:1] \n", "[w:1] beta gamma\n",
                                       "[w:1] last without newline\n"};
  CHECK(prefix_all({text}, 1000) == expected);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(prefix_all(bytes, 1000) == expected);
  CHECK(prefix_all({"alp", "ha\n\nbeta", " gamma\nlast with", "out newline"}, 1000) == expected);
  CHECK(prefix_all({}, 1000).empty());
  CHECK(prefix_all({"ends\n"}, 1000) == std::vector<std::string>{"[w:1] ends\n"});
}

TEST_CASE("LinePrefixer cuts a line longer than max_line into lines of max_line bytes") {
  CHECK(prefix_all({"abcdefgh\nxy\n"}, 3) ==
        std::vector<std::string>{"[w:1] abc\n", "[w:1] def\n", "[w:1] gh\n", "[w:1] xy\n"});
  // A line of exactly max_line bytes is one line, with no empty line after it.
  CHECK(prefix_all({"abc", "\n", "d"}, 3) == std::vector<std::string>{"[w:1] abc\n", "[w:1] d\n"});
  CHECK(prefix_all({"ab", "cd", "ef", "g"}, 3) ==
        std::vector<std::string>{"[w:1] abc\n", "[w:1] def\n", "[w:1] g\n"});
}

TEST_CASE("ExitStatus: exit codes as they are, signals as 128 + N, described for the log") {
  ExitStatus exited = status_of_child([] { ::_exit(3); });
  CHECK(exited.code == 3);
  CHECK(exited.signal == 0);
  CHECK_FALSE(exited.success());
  CHECK(exited.shell_code() == 3);
  CHECK(exited.describe() == "exited with status 3");
  ExitStatus killed = status_of_child([] { ::kill(::getpid(), SIGKILL); });
  CHECK(killed.signal == SIGKILL);
  CHECK(killed.shell_code() == 137);
  CHECK(killed.describe() == "exited with status 137 (killed by SIGKILL)");
  ExitStatus fine = status_of_child([] {});
  CHECK(fine.success());
  CHECK(fine.describe() == "exited with status 0");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
}

TEST_CASE("plan_local_job: chief:0, worker:0..N-2, the evaluator listed in the cluster") {
  std::vector<TaskPlan> plans = plan_local_job(3, true, {4001, 4002, 4003, 4004});
  REQUIRE(plans.size() == 4);
  std::vector<std::string> labels;
  for (const TaskPlan& plan : plans) labels.push_back(task_label(plan.task));
  CHECK(labels == std::vector<std::string>{"chief:0", "worker:0", "worker:1", "evaluator:0"});
  CHECK(task_words(plans[2].task) == "worker 1");
  distribute::TfConfig chief = distribute::parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:4001"], "evaluator": ["127.0.0.1:4004"],
                      "worker": ["127.0.0.1:4002", "127.0.0.1:4003"]},
          "task": {"type": "chief", "index": 0}})");
  CHECK(plans[0].tf_config == chief);
  for (const TaskPlan& plan : plans) {
    CHECK(plan.tf_config.cluster == chief.cluster);
    CHECK(plan.tf_config.task == plan.task);
    CHECK(plan.trains == (plan.task.type != TaskType::kEvaluator));
    CHECK(distribute::parse_tf_config(distribute::to_json(plan.tf_config)) == plan.tf_config);
  }
  CHECK(plan_local_job(1, false, {4001}).size() == 1);
  CHECK(plan_local_job(2, false, {4001, 4002})[0].tf_config.cluster.has_job(TaskType::kEvaluator) ==
        false);
  CHECK_THROWS_AS(plan_local_job(2, true, {4001, 4002}), InvalidArgumentError);
  CHECK_THROWS_AS(plan_local_job(0, false, {}), InvalidArgumentError);
  CHECK_THROWS_AS(plan_local_job(2, false, {4001}), InvalidArgumentError);
}

TEST_CASE("plan_local_job: ps tasks after the workers, listed as \"ps\", failing the job") {
  std::vector<TaskPlan> plans = plan_local_job(2, true, {4001, 4002, 4003, 4004, 4005}, 2);
  REQUIRE(plans.size() == 5);
  std::vector<std::string> labels;
  for (const TaskPlan& plan : plans) labels.push_back(task_label(plan.task));
  CHECK(labels == std::vector<std::string>{"chief:0", "worker:0", "ps:0", "ps:1", "evaluator:0"});
  CHECK(plans[0].tf_config.cluster.job_tasks(TaskType::kPs) ==
        std::vector<std::string>{"127.0.0.1:4003", "127.0.0.1:4004"});
  CHECK(plans[0].tf_config.cluster.task_address(TaskType::kEvaluator, 0) == "127.0.0.1:4005");
  for (const TaskPlan& plan : plans) {
    CHECK(plan.serves == (plan.task.type == TaskType::kPs));
    CHECK(plan.trains ==
          (plan.task.type == TaskType::kChief || plan.task.type == TaskType::kWorker));
  }
  CHECK_THROWS_AS(plan_local_job(2, false, {4001, 4002}, -1), InvalidArgumentError);
  CHECK_THROWS_AS(plan_local_job(2, false, {4001, 4002}, 1), InvalidArgumentError);
}

TEST_CASE("free_loopback_ports gives distinct ports that can be bound") {
  std::vector<int> ports = free_loopback_ports(8);
  CHECK(std::set<int>(ports.begin(), ports.end()).size() == 8);
  for (int port : ports) CHECK((port > 0 && port < 65536));
}

TEST_CASE("task_environment: TF_CONFIG, the token instead of a token file, OMP_WAIT_POLICY") {
  TaskPlan plan = plan_local_job(2, false, {4001, 4002})[1];
  Environment base{
      {"PATH", "/bin"}, {"TF_CONFIG", "{\"old\": 1}"}, {"EST_JOB_TOKEN_FILE", "/secret"}};
  Environment environment = task_environment(base, plan, "0123456789abcdef0123", 2);
  CHECK(environment.at("PATH") == "/bin");
  CHECK(environment.at("TF_CONFIG") == distribute::to_json(plan.tf_config));
  CHECK(environment.at("EST_JOB_TOKEN") == "0123456789abcdef0123");
  CHECK(environment.count("EST_JOB_TOKEN_FILE") == 0);
  CHECK(environment.at("OMP_WAIT_POLICY") == "passive");
  base["OMP_WAIT_POLICY"] = "active";
  CHECK(task_environment(base, plan, "t", 2).at("OMP_WAIT_POLICY") == "active");
  base.erase("OMP_WAIT_POLICY");
  CHECK(task_environment(base, plan, "t", 1).count("OMP_WAIT_POLICY") == 0);
}

TEST_CASE("find_program looks in PATH for a bare name and checks a path as given") {
  CHECK(find_program("sh", {{"PATH", "/nonexistent:/bin:/usr/bin"}}) == "/bin/sh");
  CHECK(find_program("sh", {{"PATH", "/nonexistent"}}).empty());
  CHECK(find_program("/bin/sh", {}) == "/bin/sh");
  CHECK(find_program("/nonexistent/sh", {}).empty());
  CHECK(find_program("/tmp", {}).empty());  // a directory is not a program
  CHECK(find_program("", {}).empty());
}
