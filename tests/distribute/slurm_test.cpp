// SLURM: hostlist and tasks-per-node expansion (TensorFlow's slurm_cluster_resolver_test cases
// and more), the cluster built from recorded srun environments (several node lists and
// tasks-per-node forms, block and cyclic placement, explicit jobs), and bad environments, each
// an InvalidArgumentError naming the variable.
#include <doctest/doctest.h>

#include "distribute/cluster/multi_worker_util.h"
#include "distribute/cluster/slurm.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

using Strings = std::vector<std::string>;

std::string slurm_error(const Environment& environment, const SlurmOptions& options = {}) {
  return error_message<InvalidArgumentError>([&] { resolve_slurm(environment, options); });
}

}  // namespace

TEST_CASE("slurm: expand_hostlist keeps order and zero padding, and multiplies bracket groups") {
  CHECK(expand_hostlist("n1") == Strings{"n1"});
  CHECK(expand_hostlist("n[1,3]") == Strings{"n1", "n3"});
  CHECK(expand_hostlist("n[1-3]") == Strings{"n1", "n2", "n3"});
  CHECK(expand_hostlist("n[1-2],m5,o[3-4,6,7-9]") ==
        Strings{"n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"});
  CHECK(expand_hostlist("n[0001-0003],m5,o[009-011]") ==
        Strings{"n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"});
  CHECK(expand_hostlist("node[01-03,7]") == Strings{"node01", "node02", "node03", "node7"});
  CHECK(expand_hostlist("n[9-10]") == Strings{"n9", "n10"});
  CHECK(expand_hostlist("rack[1-2]-n[01-02]") ==
        Strings{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"});
  CHECK(expand_hostlist("gpu[3]x") == Strings{"gpu3x"});
  for (std::string_view bad : {"n[1-", "n[3-1]", "n[a-b]", "n[1-2]],x", "a,,b", "n[[1]]", "n[]",
                               "n[1-2-3]", "", "n[1-3],", "n 1"}) {
    CAPTURE(bad);
    std::string message = error_message<InvalidArgumentError>([&] { expand_hostlist(bad); });
    CHECK(contains(message, fmt::format("hostlist \"{}\"", bad)));
  }
  CHECK(contains(error_message<InvalidArgumentError>([] { expand_hostlist("n[1-999999999]"); }),
                 "more than"));
}

TEST_CASE("slurm: expand_tasks_per_node reads N and N(xM)") {
  using Ints = std::vector<int>;
  CHECK(expand_tasks_per_node("2") == Ints{2});
  CHECK(expand_tasks_per_node("2,1,3") == Ints{2, 1, 3});
  CHECK(expand_tasks_per_node("3(x2),2,1") == Ints{3, 3, 2, 1});
  CHECK(expand_tasks_per_node("3(x2),2,11(x4)") == Ints{3, 3, 2, 11, 11, 11, 11});
  CHECK(expand_tasks_per_node("13(x10)") == Ints(10, 13));
  for (std::string_view bad :
       {"", "x", "2(x)", "2(x3", "(x3)", "0", "2,,1", "2x3", "-1", "2(x0)"}) {
    CAPTURE(bad);
    std::string message = error_message<InvalidArgumentError>([&] { expand_tasks_per_node(bad); });
    CHECK(contains(message, fmt::format("tasks-per-node \"{}\"", bad)));
  }
}

TEST_CASE("slurm: TensorFlow's recorded environments give TensorFlow's clusters") {
  // slurm_cluster_resolver_test.testSimpleRetrievalFromEnv: every task a worker.
  Environment simple = {{"SLURM_PROCID", "0"},
                        {"SLURM_STEP_NUM_TASKS", "3"},
                        {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
                        {"SLURM_STEP_NODELIST", "t02n13,t02n41,t02n43"}};
  CHECK(in_slurm_step(simple));
  SlurmTask task = resolve_slurm(simple);
  CHECK(task.tf_config.cluster.to_string() ==
        R"({"worker": ["t02n13:8888", "t02n41:8888", "t02n43:8888"]})");
  REQUIRE(task.tf_config.task.has_value());
  CHECK(*task.tf_config.task == TaskSpec{TaskType::kWorker, 0});
  CHECK(is_chief(task.tf_config.cluster, *task.tf_config.task));  // worker 0 leads
  CHECK(task.host == "t02n13");
  CHECK(task.local_index == 0);
  TaskFields fields = resolve_task_fields(task.tf_config, ChiefRule::kMultiWorker, {});
  CHECK(fields.master == "grpc://t02n13:8888");
  CHECK(fields.num_worker_replicas == 3);

  // testMultiTaskPerNodeRetrieval: one ps, four workers, two tasks on the first two nodes.
  Environment multi = {{"SLURM_PROCID", "1"},
                       {"SLURM_STEP_NUM_TASKS", "5"},
                       {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
                       {"SLURM_STEP_NODELIST", "t02n13,t02n41,t02n43"}};
  SlurmTask second = resolve_slurm(multi, {.jobs = {{TaskType::kPs, 1}, {TaskType::kWorker, 4}}});
  CHECK(second.tf_config.cluster.job_tasks(TaskType::kPs) == Strings{"t02n13:8888"});
  CHECK(second.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"t02n13:8889", "t02n41:8888", "t02n41:8889", "t02n43:8888"});
  CHECK(*second.tf_config.task == TaskSpec{TaskType::kWorker, 0});
  CHECK(second.host == "t02n13");
  CHECK(second.local_index == 1);
  CHECK(second.tasks_on_node == 2);
  CHECK(!in_slurm_step({{"SLURM_PROCID", "0"}}));
}

TEST_CASE("slurm: compressed node lists, a port base, node order kept, explicit chief") {
  Environment compressed = {{"SLURM_PROCID", "6"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                            {"SLURM_STEP_NODELIST", "node[01-03,7]"},
                            {"SLURM_LOCALID", "0"}};
  SlurmTask last = resolve_slurm(compressed, {.port_base = 20000});
  CHECK(last.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"node01:20000", "node01:20001", "node02:20000", "node02:20001", "node03:20000",
                "node03:20001", "node7:20000"});
  CHECK(*last.tf_config.task == TaskSpec{TaskType::kWorker, 6});
  CHECK(last.host == "node7");

  // n9 before n10, as SLURM places ranks (TensorFlow would sort n10 first).
  Environment widths = {{"SLURM_PROCID", "2"},
                        {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                        {"SLURM_STEP_NODELIST", "n[9-10]"}};
  SlurmTask third = resolve_slurm(widths);
  CHECK(third.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"n9:8888", "n9:8889", "n10:8888", "n10:8889"});
  CHECK(third.host == "n10");

  // A chief job takes rank 0, the workers the rest (jobs in name order).
  Environment gpus = {{"SLURM_PROCID", "0"},
                      {"SLURM_STEP_NUM_TASKS", "4"},
                      {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                      {"SLURM_STEP_NODELIST", "gpu[1-2]"}};
  SlurmTask chief = resolve_slurm(gpus, {.jobs = {{TaskType::kWorker, 3}, {TaskType::kChief, 1}}});
  CHECK(chief.tf_config.cluster.job_tasks(TaskType::kChief) == Strings{"gpu1:8888"});
  CHECK(chief.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"gpu1:8889", "gpu2:8888", "gpu2:8889"});
  CHECK(*chief.tf_config.task == TaskSpec{TaskType::kChief, 0});
  // Its TF_CONFIG reads back the same.
  CHECK(parse_tf_config(to_json(chief.tf_config)) == chief.tf_config);
}

TEST_CASE("slurm: cyclic distribution places ranks round-robin over the nodes") {
  Environment cyclic = {{"SLURM_PROCID", "2"},
                        {"SLURM_STEP_TASKS_PER_NODE", "2,1"},
                        {"SLURM_STEP_NODELIST", "a,b"},
                        {"SLURM_DISTRIBUTION", "cyclic"},
                        {"SLURM_LOCALID", "1"}};
  SlurmTask task = resolve_slurm(cyclic);
  CHECK(task.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"a:8888", "b:8888", "a:8889"});
  CHECK(task.host == "a");
  CHECK(task.local_index == 1);
  // "block:cyclic" (nodes block, cores cyclic) is block across nodes.
  Environment block_cyclic = {{"SLURM_PROCID", "1"},
                              {"SLURM_STEP_TASKS_PER_NODE", "2,1"},
                              {"SLURM_STEP_NODELIST", "a,b"},
                              {"SLURM_DISTRIBUTION", "block:cyclic"},
                              {"SLURM_LOCALID", "1"}};
  SlurmTask block = resolve_slurm(block_cyclic);
  CHECK(block.tf_config.cluster.job_tasks(TaskType::kWorker) ==
        Strings{"a:8888", "a:8889", "b:8888"});
  CHECK(block.host == "a");
}

TEST_CASE("slurm: bad environments name the variable and quote its value") {
  Environment good = {{"SLURM_PROCID", "1"},
                      {"SLURM_STEP_NUM_TASKS", "4"},
                      {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                      {"SLURM_STEP_NODELIST", "node[1-2]"}};
  CHECK_NOTHROW(resolve_slurm(good));
  auto changed = [&](const std::string& name, const std::string& value) {
    Environment copy = good;
    if (value == "<unset>")
      copy.erase(name);
    else
      copy[name] = value;
    return copy;
  };
  std::string no_rank = slurm_error(changed("SLURM_PROCID", "<unset>"));
  CHECK(contains(no_rank, "SLURM_PROCID is not set"));
  CHECK(contains(no_rank, "srun"));
  CHECK(contains(slurm_error(changed("SLURM_STEP_NODELIST", "<unset>")), "SLURM_STEP_NODELIST"));
  CHECK(contains(slurm_error(changed("SLURM_STEP_TASKS_PER_NODE", "<unset>")),
                 "SLURM_STEP_TASKS_PER_NODE"));
  CHECK(contains(slurm_error(changed("SLURM_PROCID", "one")), "SLURM_PROCID=\"one\""));
  CHECK(contains(slurm_error(changed("SLURM_STEP_NODELIST", "node[1-")), "hostlist \"node[1-\""));
  CHECK(contains(slurm_error(changed("SLURM_STEP_TASKS_PER_NODE", "2(x)")),
                 "tasks-per-node \"2(x)\""));
  std::string lengths = slurm_error(changed("SLURM_STEP_TASKS_PER_NODE", "4"));
  CHECK(contains(lengths, "SLURM_STEP_NODELIST=\"node[1-2]\" names 2 nodes"));
  CHECK(contains(lengths, "SLURM_STEP_TASKS_PER_NODE=\"4\" gives counts for 1"));
  CHECK(contains(slurm_error(changed("SLURM_STEP_NODELIST", "a,a")), "names a node twice"));
  CHECK(contains(slurm_error(changed("SLURM_STEP_NUM_TASKS", "5")), "SLURM_STEP_NUM_TASKS=5"));
  CHECK(contains(slurm_error(changed("SLURM_PROCID", "4")), "SLURM_PROCID=4 is out of range"));
  CHECK(contains(slurm_error(changed("SLURM_DISTRIBUTION", "plane=2")),
                 "SLURM_DISTRIBUTION=\"plane=2\""));
  CHECK(contains(slurm_error(changed("SLURM_LOCALID", "0")), "SLURM_LOCALID=\"0\""));
  std::string jobs = slurm_error(good, {.jobs = {{TaskType::kWorker, 3}}});
  CHECK(contains(jobs, "ask for 3 tasks but the step has 4"));
  CHECK(contains(slurm_error(good, {.port_base = 65535}), "port_base 65535"));
  CHECK(contains(slurm_error(good, {.jobs = {{TaskType::kChief, 2}, {TaskType::kWorker, 2}}}),
                 "SLURM: cluster.chief lists 2 addresses"));
}
