// `est-launch --slurm` on recorded srun environments (what `srun env` printed for a rank of
// each step): the program runs in est-launch's place with the TF_CONFIG of its rank, and steps
// est-launch cannot run are refused with a message that says what to do.
#include <doctest/doctest.h>
#include <stdlib.h>

#include "distribute/cluster/tf_config.h"
#include "tests/tools/launcher.h"

using namespace est::testing;
using namespace est::distribute;

namespace {

using Env = std::map<std::string, std::string>;

// `srun --nodes=2 --ntasks=4` on node01 and node02: rank 3 (the second task on node02).
const Env kTwoNodesRank3 = {
    {"SLURM_CLUSTER_NAME", "cluster"},
    {"SLURM_JOB_ID", "4711"},
    {"SLURM_JOBID", "4711"},
    {"SLURM_JOB_NAME", "train"},
    {"SLURM_JOB_NODELIST", "node[01-02]"},
    {"SLURM_JOB_NUM_NODES", "2"},
    {"SLURM_NODELIST", "node[01-02]"},
    {"SLURM_NNODES", "2"},
    {"SLURM_NTASKS", "4"},
    {"SLURM_NPROCS", "4"},
    {"SLURM_TASKS_PER_NODE", "2(x2)"},
    {"SLURM_STEP_ID", "0"},
    {"SLURM_STEPID", "0"},
    {"SLURM_STEP_NODELIST", "node[01-02]"},
    {"SLURM_STEP_NUM_NODES", "2"},
    {"SLURM_STEP_NUM_TASKS", "4"},
    {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
    {"SLURM_SRUN_COMM_HOST", "10.1.0.1"},
    {"SLURM_PROCID", "3"},
    {"SLURM_LOCALID", "1"},
    {"SLURM_NODEID", "1"},
    {"SLURM_GTIDS", "2,3"},
    {"SLURMD_NODENAME", "node02"},
    {"SLURM_TOPOLOGY_ADDR", "node02"},
    {"SLURM_CPUS_ON_NODE", "8"},
    {"SLURM_TASK_PID", "20817"},
    {"SLURM_DISTRIBUTION", "block"},
    {"SLURM_UMASK", "0022"},
};

Env with(Env env, const Env& changes) {
  for (const auto& [key, value] : changes) env[key] = value;
  return env;
}

// The test process's own SLURM, token and TF_CONFIG variables would reach est-launch.
void clear_inherited_environment() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (name.starts_with("SLURM") || name.starts_with("EST_JOB_TOKEN") || name == "TF_CONFIG" ||
        name == "OMP_WAIT_POLICY")
      names.push_back(name);
  }
  for (const std::string& name : names) ::unsetenv(name.c_str());
}

struct SlurmRun {
  int exit_code;
  std::string output;
  std::vector<ConfigLine> configs;
  bool ran_in_place;  // the program had est-launch's process id
};

SlurmRun run_slurm(const std::vector<std::string>& flags, const Env& env) {
  clear_inherited_environment();
  LaunchRun run;
  run.start(flags, {"config"}, env);
  SlurmRun result{run.wait(), run.output(), {}, false};
  result.configs = config_lines(result.output);
  std::vector<pid_t> pids = run.task_pids();
  result.ran_in_place = pids.size() == 1 && pids[0] == run.pid();
  return result;
}

}  // namespace

TEST_CASE("--slurm: rank 0 is the chief, the other ranks workers, ports from --port-base") {
  SlurmRun run = run_slurm({"--slurm", "--port-base", "20000"},
                           with(kTwoNodesRank3, {{"EST_JOB_TOKEN", "0123456789abcdef0123"}}));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE_MESSAGE(run.configs.size() == 1, run.output);
  const ConfigLine& line = run.configs[0];
  CHECK(line.prefix.empty());  // srun labels output itself (--label)
  CHECK(run.ran_in_place);
  CHECK(parse_tf_config(line.tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["node01:20000"],
                                        "worker": ["node01:20001", "node02:20000", "node02:20001"]},
                            "task": {"type": "worker", "index": 2}})"));
  CHECK(line.token == "0123456789abcdef0123");  // passed on, not replaced
  CHECK(line.omp == "passive");                 // two tasks share node02
  CHECK(contains(run.output, "SLURM rank 3 on node02 is worker:2"));
}

TEST_CASE("--slurm follows srun's cyclic placement and replaces an inherited TF_CONFIG") {
  Env env = with(kTwoNodesRank3, {{"SLURM_PROCID", "1"},
                                  {"SLURM_LOCALID", "0"},
                                  {"SLURM_GTIDS", "1,3"},
                                  {"SLURM_DISTRIBUTION", "cyclic"},
                                  {"EST_JOB_TOKEN_FILE", "/run/secrets/token"},
                                  {"OMP_WAIT_POLICY", "active"},
                                  {"TF_CONFIG", R"({"cluster": {"worker": ["x:1"]}})"}});
  SlurmRun run = run_slurm({"--slurm"}, env);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE(run.configs.size() == 1);
  CHECK(parse_tf_config(run.configs[0].tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["node01:8888"],
                                        "worker": ["node02:8888", "node01:8889", "node02:8889"]},
                            "task": {"type": "worker", "index": 0}})"));
  CHECK(run.configs[0].token_file == "/run/secrets/token");
  CHECK(run.configs[0].omp == "active");
  CHECK(contains(run.output, "TF_CONFIG is set; replacing it"));
}

TEST_CASE("--slurm --evaluator: the evaluator is rank 1, listed as SlurmClusterResolver lists it") {
  Env env = {{"SLURM_JOB_ID", "99"},
             {"SLURM_STEP_NODELIST", "n[1-3]"},
             {"SLURM_STEP_NUM_NODES", "3"},
             {"SLURM_STEP_NUM_TASKS", "3"},
             {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
             {"SLURM_NTASKS", "3"},
             {"SLURM_PROCID", "1"},
             {"SLURM_LOCALID", "0"},
             {"SLURM_NODEID", "1"},
             {"SLURMD_NODENAME", "n2"},
             {"EST_JOB_TOKEN", "0123456789abcdef0123"}};
  SlurmRun run = run_slurm({"--slurm", "--evaluator"}, env);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE(run.configs.size() == 1);
  CHECK(parse_tf_config(run.configs[0].tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["n1:8888"], "evaluator": ["n2:8888"],
                                        "worker": ["n3:8888"]},
                            "task": {"type": "evaluator", "index": 0}})"));
  CHECK(run.configs[0].omp.empty());  // one task per node: no need to yield the cores
}

TEST_CASE("--slurm --ps: the ps tasks take the ranks after the chief (and the evaluator)") {
  // SlurmClusterResolver gives ranks to jobs in the order of their names (chief, evaluator, ps,
  // worker): on 2 nodes of 2 tasks, rank 1 is ps 0 beside the chief.
  SlurmRun run = run_slurm({"--slurm", "--ps", "1"},
                           with(kTwoNodesRank3, {{"SLURM_PROCID", "1"},
                                                 {"SLURM_LOCALID", "1"},
                                                 {"SLURM_GTIDS", "0,1"},
                                                 {"SLURM_NODEID", "0"},
                                                 {"SLURMD_NODENAME", "node01"},
                                                 {"EST_JOB_TOKEN", "0123456789abcdef0123"}}));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE_MESSAGE(run.configs.size() == 1, run.output);
  CHECK(run.ran_in_place);
  CHECK(parse_tf_config(run.configs[0].tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["node01:8888"], "ps": ["node01:8889"],
                                        "worker": ["node02:8888", "node02:8889"]},
                            "task": {"type": "ps", "index": 0}})"));
  CHECK(run.configs[0].omp == "passive");  // the ps task shares node01 with the chief
  CHECK(contains(run.output, "SLURM rank 1 on node01 is ps:0"));

  // Five nodes of one task, with the evaluator and two ps tasks: rank 4 is the one worker.
  Env five = {{"SLURM_STEP_NODELIST", "n[1-5]"},
              {"SLURM_STEP_TASKS_PER_NODE", "1(x5)"},
              {"SLURM_STEP_NUM_TASKS", "5"},
              {"SLURM_PROCID", "4"},
              {"SLURM_LOCALID", "0"},
              {"EST_JOB_TOKEN", "0123456789abcdef0123"}};
  run = run_slurm({"--slurm", "--evaluator", "--ps", "2"}, five);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE(run.configs.size() == 1);
  CHECK(parse_tf_config(run.configs[0].tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["n1:8888"], "evaluator": ["n2:8888"],
                                        "ps": ["n3:8888", "n4:8888"], "worker": ["n5:8888"]},
                            "task": {"type": "worker", "index": 0}})"));

  // As many ps tasks as the step has tasks leaves no room for the chief.
  run = run_slurm({"--slurm", "--ps", "4"},
                  with(kTwoNodesRank3, {{"EST_JOB_TOKEN", "0123456789abcdef0123"}}));
  CHECK(run.exit_code == 1);
  CHECK_MESSAGE(contains(run.output,
                         "--slurm --ps 4: the step has 4 task(s); it needs the "
                         "chief and 4 ps task(s) (srun --ntasks=5 or more)"),
                run.output);
  CHECK(run.configs.empty());
}

TEST_CASE("--slurm: a step of one task needs no token") {
  Env env = {{"SLURM_STEP_NODELIST", "gpu7"},
             {"SLURM_STEP_TASKS_PER_NODE", "1"},
             {"SLURM_STEP_NUM_TASKS", "1"},
             {"SLURM_PROCID", "0"},
             {"SLURM_LOCALID", "0"}};
  SlurmRun run = run_slurm({"--slurm"}, env);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE(run.configs.size() == 1);
  CHECK(parse_tf_config(run.configs[0].tf_config) ==
        parse_tf_config(R"({"cluster": {"chief": ["gpu7:8888"]},
                            "task": {"type": "chief", "index": 0}})"));
}

TEST_CASE("--slurm refuses what it cannot run, saying what to do, before the program starts") {
  SUBCASE("several tasks without a token") {
    SlurmRun run = run_slurm({"--slurm"}, kTwoNodesRank3);
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(contains(run.output, "export EST_JOB_TOKEN=$(est-launch --generate-token)"),
                  run.output);
    CHECK(run.configs.empty());
  }
  SUBCASE("not under srun") {
    SlurmRun run = run_slurm({"--slurm"}, {{"EST_JOB_TOKEN", "0123456789abcdef0123"}});
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(contains(run.output, "run it under srun"), run.output);
  }
  SUBCASE("a malformed node list") {
    SlurmRun run = run_slurm(
        {"--slurm"},
        with(kTwoNodesRank3, {{"SLURM_STEP_NODELIST", "node[02-01]"}, {"EST_JOB_TOKEN", "x"}}));
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(contains(run.output, "node[02-01]"), run.output);
  }
  SUBCASE("--evaluator in a step of one task") {
    SlurmRun run = run_slurm({"--slurm", "--evaluator"}, {{"SLURM_STEP_NODELIST", "gpu7"},
                                                          {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                                          {"SLURM_PROCID", "0"}});
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(contains(run.output, "--ntasks=2"), run.output);
  }
  SUBCASE("a program that does not exist: 127") {
    clear_inherited_environment();
    LaunchRun run;
    run.start_raw({kEstLaunch, "--slurm", "--", "/nonexistent/program"},
                  {{"SLURM_STEP_NODELIST", "gpu7"},
                   {"SLURM_STEP_TASKS_PER_NODE", "1"},
                   {"SLURM_PROCID", "0"}});
    CHECK(run.wait() == 127);
    CHECK(contains(run.output(), "cannot run '/nonexistent/program'"));
  }
}
