// ClusterSpec and multi_worker_util against TensorFlow's rules: TaskType names, host:port
// checks, the cluster's invariants (duplicates, one chief), the two numberings
// (multi_worker_util.id_in_cluster and RunConfig.global_id_in_cluster) where they differ, the
// chief of a cluster with and without a "chief" job, and the count of tasks on this host.
#include <doctest/doctest.h>

#include "distribute/cluster/cluster_spec.h"
#include "distribute/cluster/multi_worker_util.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

std::string cluster_error(ClusterSpec::Jobs jobs) {
  return error_message<InvalidArgumentError>([&] { ClusterSpec spec(std::move(jobs)); });
}

std::string address_error(std::string_view address) {
  return error_message<InvalidArgumentError>([&] { parse_host_port(address, "here"); });
}

}  // namespace

TEST_CASE("cluster: TaskType names round-trip and unknown names are refused with the valid ones") {
  for (TaskType type : {TaskType::kChief, TaskType::kMaster, TaskType::kWorker, TaskType::kPs,
                        TaskType::kEvaluator}) {
    CAPTURE(task_type_name(type));
    CHECK(task_type_from_name(task_type_name(type)) == type);
    CHECK(fmt::format("{}", type) == task_type_name(type));
  }
  CHECK(task_type_name(TaskType::kPs) == "ps");
  CHECK(task_type_name(TaskType::kEvaluator) == "evaluator");
  CHECK_FALSE(task_type_from_name("Worker").has_value());
  CHECK_FALSE(task_type_from_name("").has_value());
  std::string message =
      error_message<InvalidArgumentError>([] { parse_task_type("workers", "TF_CONFIG x"); });
  CHECK(contains(message, "TF_CONFIG x"));
  CHECK(contains(message, "\"workers\""));
  CHECK(contains(message, "\"evaluator\""));
}

TEST_CASE("cluster: host:port is parsed, IPv6 in brackets, and every bad form quotes itself") {
  HostPort plain = parse_host_port("localhost:12345", "here");
  CHECK(plain.host == "localhost");
  CHECK(plain.port == 12345);
  HostPort v6 = parse_host_port("[::1]:2222", "here");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 2222);
  CHECK(parse_host_port("worker-0.svc.cluster.local:1", "here").host ==
        "worker-0.svc.cluster.local");
  for (std::string_view bad : {"localhost", "localhost:", ":2222", "localhost:abc", "localhost:0",
                               "localhost:65536", "localhost:-1", "localhost:+80", "::1:2222",
                               "[::1:2222", "grpc://host:2222", "host name:1", "[zz]:1"}) {
    CAPTURE(bad);
    std::string message = address_error(bad);
    CHECK(contains(message, "here"));
    CHECK(contains(message, fmt::format("\"{}\"", bad)));
    CHECK(contains(message, "host:port"));
  }
  CHECK(contains(address_error("grpc://host:2222"), "drop the \"grpc://\""));
  CHECK(contains(address_error("::1:2222"), "brackets"));
}

TEST_CASE("cluster: jobs sorted by name, counts, addresses, and empty jobs dropped") {
  ClusterSpec spec({{TaskType::kWorker, {"host3:2222", "host4:2222"}},
                    {TaskType::kPs, {"host1:2222"}},
                    {TaskType::kChief, {"host0:2222"}},
                    {TaskType::kEvaluator, {}}});
  CHECK(spec.jobs() == std::vector<TaskType>{TaskType::kChief, TaskType::kPs, TaskType::kWorker});
  CHECK_FALSE(spec.has_job(TaskType::kEvaluator));
  CHECK(spec.num_tasks(TaskType::kWorker) == 2);
  CHECK(spec.num_tasks(TaskType::kMaster) == 0);
  CHECK(spec.num_tasks() == 4);
  CHECK(spec.task_address(TaskType::kWorker, 1) == "host4:2222");
  CHECK(spec.job_tasks(TaskType::kEvaluator).empty());
  CHECK(
      spec.to_string() ==
      R"({"chief": ["host0:2222"], "ps": ["host1:2222"], "worker": ["host3:2222", "host4:2222"]})");
  std::string message =
      error_message<InvalidArgumentError>([&] { spec.task_address(TaskType::kWorker, 2); });
  CHECK(contains(message, "worker:2"));
  CHECK(ClusterSpec().empty());
  CHECK(ClusterSpec(ClusterSpec::Jobs{{TaskType::kPs, {}}}).empty());
}

TEST_CASE("cluster: duplicate addresses, two chiefs, chief with master, two evaluators") {
  std::string twice = cluster_error({{TaskType::kWorker, {"localhost:1", "localhost:1"}}});
  CHECK(contains(twice, "\"localhost:1\""));
  CHECK(contains(twice, "cluster.worker[0]"));
  CHECK(contains(twice, "cluster.worker[1]"));
  std::string across =
      cluster_error({{TaskType::kChief, {"Node1:5"}}, {TaskType::kWorker, {"a:1", "node1:5"}}});
  CHECK(contains(across, "listed twice"));
  CHECK(contains(across, "cluster.chief[0]"));
  CHECK(contains(across, "cluster.worker[1]"));
  std::string chiefs = cluster_error({{TaskType::kChief, {"a:1", "b:1"}}});
  CHECK(contains(chiefs, "cluster.chief lists 2 addresses"));
  CHECK(contains(chiefs, "a:1, b:1"));
  std::string both = cluster_error({{TaskType::kChief, {"a:1"}}, {TaskType::kMaster, {"b:1"}}});
  CHECK(contains(both, "\"chief\" (a:1)"));
  CHECK(contains(both, "\"master\" (b:1)"));
  CHECK(contains(cluster_error({{TaskType::kEvaluator, {"a:1", "b:1"}}}), "cluster.evaluator"));
  std::string bad = cluster_error({{TaskType::kPs, {"a:1", "b"}}});
  CHECK(contains(bad, "cluster.ps[1]"));
  CHECK(contains(bad, "\"b\""));
}

TEST_CASE("cluster: is_chief: the chief, else worker 0; the evaluator is its own chief") {
  ClusterSpec with_chief({{TaskType::kChief, {"c:1"}},
                          {TaskType::kWorker, {"w0:1", "w1:1"}},
                          {TaskType::kPs, {"p:1"}}});
  CHECK(is_chief(with_chief, {TaskType::kChief, 0}));
  CHECK_FALSE(is_chief(with_chief, {TaskType::kWorker, 0}));
  CHECK_FALSE(is_chief(with_chief, {TaskType::kPs, 0}));
  CHECK(is_chief(with_chief, {TaskType::kEvaluator, 0}));
  ClusterSpec workers({{TaskType::kWorker, {"w0:1", "w1:1"}}});
  CHECK(is_chief(workers, {TaskType::kWorker, 0}));
  CHECK_FALSE(is_chief(workers, {TaskType::kWorker, 1}));
  ClusterSpec legacy({{TaskType::kMaster, {"m:1"}}, {TaskType::kWorker, {"w0:1"}}});
  CHECK(is_chief(legacy, {TaskType::kMaster, 0}));
  CHECK_FALSE(is_chief(legacy, {TaskType::kWorker, 0}));
}

TEST_CASE("cluster: id_in_cluster ranks workers; global_id_in_cluster counts a listed evaluator") {
  // multi_worker_util.id_in_cluster: chief 0, worker i -> i + 1, evaluator on its own.
  // run_config.py: chief first, then the other jobs sorted by name ("evaluator" < "worker"),
  // ps last.
  ClusterSpec spec({{TaskType::kChief, {"c:1"}},
                    {TaskType::kWorker, {"w0:1", "w1:1"}},
                    {TaskType::kEvaluator, {"e:1"}},
                    {TaskType::kPs, {"p0:1", "p1:1"}}});
  CHECK(id_in_cluster(spec, {TaskType::kChief, 0}) == 0);
  CHECK(id_in_cluster(spec, {TaskType::kWorker, 0}) == 1);
  CHECK(id_in_cluster(spec, {TaskType::kWorker, 1}) == 2);
  CHECK(id_in_cluster(spec, {TaskType::kEvaluator, 0}) == 0);
  CHECK(global_id_in_cluster(spec, {TaskType::kChief, 0}) == 0);
  CHECK(global_id_in_cluster(spec, {TaskType::kEvaluator, 0}) == 1);
  CHECK(global_id_in_cluster(spec, {TaskType::kWorker, 0}) == 2);
  CHECK(global_id_in_cluster(spec, {TaskType::kWorker, 1}) == 3);
  CHECK(global_id_in_cluster(spec, {TaskType::kPs, 0}) == 4);
  CHECK(global_id_in_cluster(spec, {TaskType::kPs, 1}) == 5);
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   id_in_cluster(spec, {TaskType::kPs, 0});
                 }),
                 "no id for a \"ps\" task"));
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   id_in_cluster(spec, {TaskType::kWorker, 2});
                 }),
                 "worker:2"));
  CHECK(worker_count(spec, TaskType::kWorker) == 3);
  CHECK(worker_count(spec, TaskType::kChief) == 3);
  CHECK(worker_count(spec, TaskType::kEvaluator) == 1);
  CHECK_THROWS_AS(worker_count(spec, TaskType::kPs), InvalidArgumentError);

  // Without a chief, worker 0 has id 0 in both numberings.
  ClusterSpec workers({{TaskType::kWorker, {"w0:1", "w1:1", "w2:1"}}});
  for (int i = 0; i < 3; ++i) {
    CHECK(id_in_cluster(workers, {TaskType::kWorker, i}) == i);
    CHECK(global_id_in_cluster(workers, {TaskType::kWorker, i}) == i);
  }
  // A legacy master leads the global order.
  ClusterSpec legacy({{TaskType::kMaster, {"m:1"}},
                      {TaskType::kWorker, {"w0:1", "w1:1"}},
                      {TaskType::kPs, {"p:1"}}});
  CHECK(global_id_in_cluster(legacy, {TaskType::kMaster, 0}) == 0);
  CHECK(global_id_in_cluster(legacy, {TaskType::kWorker, 1}) == 2);
  CHECK(global_id_in_cluster(legacy, {TaskType::kPs, 0}) == 3);
}

TEST_CASE("cluster: local hosts and the number of tasks sharing this host") {
  std::vector<std::string> names = {"nodeB.example.com"};
  CHECK(is_local_host("localhost", {}));
  CHECK(is_local_host("127.0.0.1", {}));
  CHECK(is_local_host("127.1.2.3", {}));
  CHECK(is_local_host("::1", {}));
  CHECK_FALSE(is_local_host("127.example.com", {}));
  CHECK_FALSE(is_local_host("10.0.0.1", {}));
  CHECK(is_local_host("NODEB.example.com", names));
  CHECK(is_local_host("nodeB", names));  // the short name of this host
  CHECK_FALSE(is_local_host("nodeB.other.org", names));
  CHECK_FALSE(is_local_host("nodeA", names));

  ClusterSpec spec({{TaskType::kChief, {"localhost:1"}},
                    {TaskType::kWorker, {"127.0.0.1:2", "nodeA:3", "nodeB.example.com:4"}},
                    {TaskType::kPs, {"nodeB:5"}}});
  // localhost, 127.0.0.1, nodeB.example.com, nodeB; not nodeA.
  CHECK(num_local_tasks(spec, TaskSpec{TaskType::kWorker, 2}, names) == 4);
  // Without host names, this task's own host (nodeA) is local, with the loopback ones.
  CHECK(num_local_tasks(spec, TaskSpec{TaskType::kWorker, 1}, {}) == 3);
  // An evaluator outside an all-remote cluster is alone on its host.
  ClusterSpec remote({{TaskType::kWorker, {"r1:1", "r2:1"}}});
  CHECK(num_local_tasks(remote, TaskSpec{TaskType::kEvaluator, 0}, {"here"}) == 1);
  CHECK(num_local_tasks(ClusterSpec(), std::nullopt, {}) == 1);
  ClusterSpec tutorial({{TaskType::kWorker, {"localhost:12345", "localhost:23456"}}});
  CHECK(num_local_tasks(tutorial, TaskSpec{TaskType::kWorker, 0}, {}) == 2);
}
