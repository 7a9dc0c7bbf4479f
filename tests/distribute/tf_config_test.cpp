// TF_CONFIG: TensorFlow's documented examples (the multi-worker Estimator tutorial, the chief,
// worker, ps and evaluator examples of run_config.py's docstring) resolved to RunConfig's task
// fields exactly as TensorFlow computes them under both rules, and every malformed TF_CONFIG as
// an InvalidArgumentError that quotes the offending part.
#include <doctest/doctest.h>

#include "distribute/cluster/multi_worker_util.h"
#include "distribute/cluster/tf_config.h"
#include "tests/ops/expect_error.h"

using namespace est;
using namespace est::distribute;
using est::testing::contains;
using est::testing::error_message;

namespace {

// The cluster of run_config.py's docstring.
constexpr const char* kDocCluster =
    R"({"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
        "worker": ["host3:2222", "host4:2222", "host5:2222"]})";

std::string with_task(const char* cluster, const char* type, int index) {
  return fmt::format(R"({{"cluster": {}, "task": {{"type": "{}", "index": {}}}}})", cluster, type,
                     index);
}

TaskFields resolve(const std::string& json, ChiefRule rule) {
  return resolve_task_fields(parse_tf_config(json), rule, {"this-host"});
}

std::string parse_error(const std::string& json) {
  return error_message<InvalidArgumentError>([&] { parse_tf_config(json); });
}

std::string resolve_error(const std::string& json, ChiefRule rule) {
  return error_message<InvalidArgumentError>([&] { resolve(json, rule); });
}

}  // namespace

TEST_CASE("tf_config: the multi-worker Estimator tutorial's TF_CONFIG") {
  const char* kTutorial =
      R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
          "task": {"type": "worker", "index": 0}})";
  TfConfig config = parse_tf_config(kTutorial);
  CHECK(config.cluster.job_tasks(TaskType::kWorker) ==
        std::vector<std::string>{"localhost:12345", "localhost:23456"});
  REQUIRE(config.task.has_value());
  CHECK(*config.task == TaskSpec{TaskType::kWorker, 0});

  // Under MultiWorkerMirroredStrategy (the distribute coordinator): worker 0 is the chief.
  TaskFields worker0 = resolve(kTutorial, ChiefRule::kMultiWorker);
  CHECK(worker0.task_type == TaskType::kWorker);
  CHECK(worker0.task_id == 0);
  CHECK(worker0.is_chief);
  CHECK(worker0.num_worker_replicas == 2);
  CHECK(worker0.num_ps_replicas == 0);
  CHECK(worker0.global_id_in_cluster == 0);
  CHECK(worker0.master == "grpc://localhost:12345");
  CHECK(worker0.evaluation_master == "grpc://localhost:12345");
  CHECK(worker0.cluster_spec == config.cluster);
  CHECK(worker0.num_local_tasks == 2);

  std::string second = R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
                           "task": {"type": "worker", "index": 1}})";
  TaskFields worker1 = resolve(second, ChiefRule::kMultiWorker);
  CHECK_FALSE(worker1.is_chief);
  CHECK(worker1.global_id_in_cluster == 1);
  CHECK(worker1.master == "grpc://localhost:23456");
  CHECK(id_in_cluster(worker1.cluster_spec, {worker1.task_type, worker1.task_id}) == 1);

  // Without a strategy tf.estimator needs a chief: the message says both ways out.
  std::string message = resolve_error(kTutorial, ChiefRule::kEstimator);
  CHECK(contains(message, "no \"chief\""));
  CHECK(contains(message, "localhost:12345"));
  CHECK(contains(message, "train_distribute"));
}

TEST_CASE("tf_config: run_config.py's docstring examples under the Estimator rule") {
  // Non-chief node: worker 1.
  TaskFields worker = resolve(with_task(kDocCluster, "worker", 1), ChiefRule::kEstimator);
  CHECK(worker.master == "grpc://host4:2222");  // the docstring omits the scheme; the code adds it
  CHECK(worker.task_id == 1);
  CHECK(worker.num_ps_replicas == 2);
  CHECK(worker.num_worker_replicas == 4);
  CHECK(worker.cluster_spec.to_string() ==
        R"({"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"], )"
        R"("worker": ["host3:2222", "host4:2222", "host5:2222"]})");
  CHECK(worker.task_type == TaskType::kWorker);
  CHECK_FALSE(worker.is_chief);
  CHECK(worker.evaluation_master == "");

  // Chief node.
  TaskFields chief = resolve(with_task(kDocCluster, "chief", 0), ChiefRule::kEstimator);
  CHECK(chief.master == "grpc://host0:2222");
  CHECK(chief.task_id == 0);
  CHECK(chief.num_ps_replicas == 2);
  CHECK(chief.num_worker_replicas == 4);
  CHECK(chief.task_type == TaskType::kChief);
  CHECK(chief.is_chief);

  // Evaluator node: not part of the training cluster.
  TaskFields evaluator = resolve(with_task(kDocCluster, "evaluator", 0), ChiefRule::kEstimator);
  CHECK(evaluator.master == "");
  CHECK(evaluator.evaluation_master == "");
  CHECK(evaluator.task_id == 0);
  CHECK(evaluator.num_ps_replicas == 0);
  CHECK(evaluator.num_worker_replicas == 0);
  CHECK(evaluator.cluster_spec.empty());
  CHECK(evaluator.task_type == TaskType::kEvaluator);
  CHECK_FALSE(evaluator.is_chief);
  CHECK_FALSE(evaluator.global_id_in_cluster.has_value());

  // The global_id_in_cluster table of the docstring.
  struct Row {
    const char* type;
    int index;
    int global_id;
  };
  for (Row row : {Row{"chief", 0, 0}, Row{"worker", 0, 1}, Row{"worker", 1, 2}, Row{"worker", 2, 3},
                  Row{"ps", 0, 4}, Row{"ps", 1, 5}}) {
    CAPTURE(row.type);
    CAPTURE(row.index);
    TaskFields fields = resolve(with_task(kDocCluster, row.type, row.index), ChiefRule::kEstimator);
    CHECK(fields.global_id_in_cluster == row.global_id);
    CHECK(fields.is_chief == (std::string_view(row.type) == "chief"));
  }
  TaskFields ps1 = resolve(with_task(kDocCluster, "ps", 1), ChiefRule::kEstimator);
  CHECK(ps1.master == "grpc://host2:2222");
}

TEST_CASE("tf_config: the same cluster under a strategy (TF's distribute coordinator)") {
  TaskFields chief = resolve(with_task(kDocCluster, "chief", 0), ChiefRule::kMultiWorker);
  CHECK(chief.is_chief);
  CHECK(chief.master == "grpc://host0:2222");
  CHECK(chief.evaluation_master == "grpc://host0:2222");
  CHECK(chief.num_worker_replicas == 4);
  CHECK(chief.num_ps_replicas == 2);
  CHECK(chief.global_id_in_cluster == 0);
  TaskFields worker0 = resolve(with_task(kDocCluster, "worker", 0), ChiefRule::kMultiWorker);
  CHECK_FALSE(worker0.is_chief);  // there is a chief
  CHECK(worker0.global_id_in_cluster == 1);
  // The evaluator is its own chief under the coordinator (multi_worker_util.is_chief).
  TaskFields evaluator = resolve(with_task(kDocCluster, "evaluator", 0), ChiefRule::kMultiWorker);
  CHECK(evaluator.is_chief);
  CHECK(evaluator.master == "");
  CHECK(evaluator.cluster_spec.empty());
  CHECK(evaluator.num_worker_replicas == 0);
  CHECK_FALSE(evaluator.global_id_in_cluster.has_value());
  // rpc_layer picks the scheme.
  TaskFields verbs = resolve(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1},
          "rpc_layer": "grpc+verbs"})",
      ChiefRule::kMultiWorker);
  CHECK(verbs.master == "grpc+verbs://b:1");
}

TEST_CASE("tf_config: masters, a one-task cluster, and a local run") {
  // session_master wins over the computed address (Estimator rule).
  TaskFields session = resolve(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0},
          "session_master": "grpc://elsewhere:9"})",
      ChiefRule::kEstimator);
  CHECK(session.master == "grpc://elsewhere:9");
  // The evaluator takes eval_session_master.
  TaskFields evaluator = resolve(
      R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "evaluator", "index": 0},
          "eval_session_master": "grpc://eval:7"})",
      ChiefRule::kEstimator);
  CHECK(evaluator.evaluation_master == "grpc://eval:7");
  // A cluster of one task runs with the local master "" under the Estimator rule.
  TaskFields single =
      resolve(R"({"cluster": {"chief": ["localhost:2222"]}})", ChiefRule::kEstimator);
  CHECK(single.task_type == TaskType::kChief);  // "task" left out: the only task is meant
  CHECK(single.master == "");
  CHECK(single.is_chief);
  CHECK(single.num_worker_replicas == 1);
  CHECK(resolve(R"({"cluster": {"chief": ["localhost:2222"]}})", ChiefRule::kMultiWorker).master ==
        "grpc://localhost:2222");
  // Local: "{}", an empty value, and a task that is worker 0.
  for (const char* local : {"{}", "", "  \n", R"({"task": {"type": "worker", "index": 0}})"}) {
    CAPTURE(local);
    for (ChiefRule rule : {ChiefRule::kEstimator, ChiefRule::kMultiWorker}) {
      TaskFields fields = resolve(local, rule);
      CHECK(fields == TaskFields{});
      CHECK(fields.is_chief);
      CHECK(fields.num_worker_replicas == 1);
      CHECK(fields.global_id_in_cluster == 0);
    }
  }
  CHECK(resolve(R"({"session_master": "grpc://m:1"})", ChiefRule::kEstimator).master ==
        "grpc://m:1");
  // A legacy "master" job leads, under either rule.
  const char* legacy =
      R"({"cluster": {"master": ["m:1"], "worker": ["w0:1", "w1:1"], "ps": ["p:1"]},
                           "task": {"type": "worker", "index": 1}})";
  for (ChiefRule rule : {ChiefRule::kEstimator, ChiefRule::kMultiWorker}) {
    TaskFields worker = resolve(legacy, rule);
    CHECK_FALSE(worker.is_chief);
    CHECK(worker.num_worker_replicas == 3);
    CHECK(worker.num_ps_replicas == 1);
    CHECK(worker.global_id_in_cluster == 2);
    CHECK(worker.master == "grpc://w1:1");
  }
  std::string no_evaluator = resolve_error(
      R"({"cluster": {"master": ["m:1"]}, "task": {"type": "evaluator", "index": 0}})",
      ChiefRule::kEstimator);
  CHECK(contains(no_evaluator, "\"evaluator\""));
  CHECK(contains(no_evaluator, "\"master\""));
}

TEST_CASE("tf_config: optional keys, string indices, and to_json round trips") {
  TfConfig config = parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"], "evaluator": ["e:1"]},
          "task": {"type": "worker", "index": "0"}, "environment": "cloud",
          "rpc_layer": "grpc", "model_dir": "/tmp/m", "service": {"anything": 1}})");
  CHECK(*config.task == TaskSpec{TaskType::kWorker, 0});
  CHECK(config.environment == "cloud");
  CHECK(config.rpc_layer == "grpc");
  CHECK(config.model_dir == "/tmp/m");
  CHECK(parse_tf_config(to_json(config)) == config);
  TfConfig local = parse_tf_config("{}");
  CHECK(to_json(local) == "{}");
  CHECK(parse_tf_config(to_json(local)) == local);
  CHECK(to_json(parse_tf_config(with_task(R"({"worker": ["a:1"]})", "worker", 0))) ==
        R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}})");
}

TEST_CASE("tf_config: bad JSON quotes where the parser stopped and shows the expected form") {
  std::string missing_comma =
      parse_error(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker" "index": 0}})");
  CHECK(contains(missing_comma, "TF_CONFIG is not valid JSON"));
  CHECK(contains(missing_comma, "\"worker\" \""));  // the parser's last read
  CHECK(contains(missing_comma, R"("task": {"type": "worker", "index": 0})"));
  std::string python = parse_error("{'cluster': {'worker': ['a:1']}}");
  CHECK(contains(python, "not valid JSON"));
  CHECK(contains(python, "double quotes"));
  std::string truncated = parse_error(R"({"cluster": {"worker": ["a:1"])");
  CHECK(contains(truncated, "not valid JSON"));
  std::string list = parse_error(R"(["worker", 0])");
  CHECK(contains(list, "must be a JSON object"));
  CHECK(contains(list, R"(["worker",0])"));
}

TEST_CASE("tf_config: every malformed cluster or task is an InvalidArgumentError quoting it") {
  struct Case {
    const char* json;
    std::vector<const char*> quoted;  // parts the message must contain
  };
  std::vector<Case> cases = {
      // task type not in the cluster
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "ps", "index": 0}})",
       {"task.type \"ps\" is not in the cluster", R"({"worker": ["a:1", "b:1"]})"}},
      // index out of range, and negative
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}})",
       {"task.index 2 is out of range", "a:1, b:1", "0..1"}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": -1}})",
       {"task.index -1"}},
      {R"({"cluster": {"evaluator": ["e:1"], "chief": ["c:1"]}, "task": {"type": "evaluator", "index": 1}})",
       {"task.index 1 is out of range", "cluster.evaluator"}},
      // missing task with more than one task
      {R"({"cluster": {"chief": ["c:1"], "worker": ["a:1"]}})",
       {"no \"task\"", "2 tasks", R"({"chief": ["c:1"], "worker": ["a:1"]})"}},
      {R"({"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": null})", {"no \"task\""}},
      // task without type or index
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"index": 1}})",
       {"has no \"type\"", R"({"index":1})"}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker"}})",
       {"has no \"index\"", R"({"type":"worker"})"}},
      // bad index types
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": "one"}})",
       {"\"one\"", "non-negative integer"}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1.5}})",
       {"1.5"}},
      // duplicate addresses
      {R"({"cluster": {"chief": ["h:1"], "worker": ["h:1"]}, "task": {"type": "chief", "index": 0}})",
       {"TF_CONFIG", "\"h:1\"", "listed twice", "cluster.chief[0]", "cluster.worker[0]"}},
      // bad host:port
      {R"({"cluster": {"worker": ["localhost:12345", "localhost"]}, "task": {"type": "worker", "index": 0}})",
       {"TF_CONFIG cluster.worker[1]", "\"localhost\"", "has no port"}},
      {R"({"cluster": {"worker": ["localhost:99999"]}})", {"\"localhost:99999\"", "1..65535"}},
      {R"({"cluster": {"worker": ["grpc://localhost:1"]}})", {"\"grpc://localhost:1\"", "scheme"}},
      // unknown task types, in the cluster and in the task
      {R"({"cluster": {"workers": ["a:1"]}, "task": {"type": "workers", "index": 0}})",
       {"unknown task type \"workers\"", "cluster key"}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "Worker", "index": 0}})",
       {"TF_CONFIG task.type", "unknown task type \"Worker\""}},
      // wrong shapes
      {R"({"cluster": ["a:1"]})", {"\"cluster\" must be an object", R"(["a:1"])"}},
      {R"({"cluster": {"worker": {"0": "a:1"}}})",
       {"cluster.worker must be a list", R"({"0":"a:1"})"}},
      {R"({"cluster": {"worker": ["a:1", 2]}})", {"cluster.worker[1]", "got a number 2"}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": "worker"})",
       {"\"task\" must be an object", "\"worker\""}},
      {R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": 1, "index": 0}})",
       {"task.type must be a string"}},
      // one chief, at most
      {R"({"cluster": {"chief": ["c:1", "d:1"]}, "task": {"type": "chief", "index": 0}})",
       {"cluster.chief lists 2 addresses", "c:1, d:1"}},
      {R"({"cluster": {"chief": ["c:1"], "master": ["m:1"]}, "task": {"type": "chief", "index": 0}})",
       {"both a \"chief\" (c:1) and a \"master\" (m:1)"}},
      // a task without a cluster must be the local worker 0
      {R"({"task": {"type": "ps", "index": 0}})", {"no \"cluster\"", R"({"index":0,"type":"ps"})"}},
      {R"({"task": {"type": "worker", "index": 1}})", {"no \"cluster\""}},
      // other keys
      {R"({"rpc_layer": 5})", {"\"rpc_layer\" must be a string", "5"}},
      {R"({"model_dir": ""})", {"\"model_dir\" is an empty string"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    std::string message = parse_error(c.json);
    CAPTURE(message);
    CHECK(message.rfind("TF_CONFIG", 0) == 0);
    for (const char* part : c.quoted) {
      CAPTURE(part);
      CHECK(contains(message, part));
    }
  }
}

TEST_CASE("tf_config: a task in a job listed empty is an error naming the job, as in TF") {
  // TensorFlow's multi_worker_util refuses the task (its index exceeds the job's size); a local
  // run here would train alone and exit 0.
  std::string alone =
      parse_error(R"({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}})");
  CHECK(alone.rfind("TF_CONFIG", 0) == 0);
  CHECK(contains(alone, "cluster.worker is an empty list"));
  CHECK(contains(alone, R"({"index":0,"type":"worker"})"));
  std::string beside = parse_error(
      R"({"cluster": {"chief": ["c:1"], "worker": []}, "task": {"type": "worker", "index": 0}})");
  CHECK(contains(beside, "cluster.worker is an empty list"));
  CHECK(contains(parse_error(R"({"cluster": {"worker": []}})"), "cluster.worker"));
  // An empty job the task is not in is left out, as TensorFlow's ClusterSpec counts it 0.
  TfConfig config = parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "ps": []}, "task": {"type": "chief", "index": 0}})");
  CHECK(config.cluster.num_tasks() == 1);
  CHECK_FALSE(config.cluster.has_job(TaskType::kPs));
}

TEST_CASE("tf_config: control characters in TF_CONFIG's strings are shown escaped, not sent") {
  // "\u0007" in JSON is a BEL in the string: the message shows it as \a.
  std::string port = parse_error(
      R"({"cluster": {"worker": ["localhost:2222\u0007"]}, "task": {"type": "worker", "index": 0}})");
  CAPTURE(port);
  CHECK(contains(port, R"(port "2222\a", not a number)"));
  CHECK(port.find('\a') == std::string::npos);
  std::string type = parse_error(
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker\u001b[2J", "index": 0}})");
  CAPTURE(type);
  CHECK(contains(type, R"(unknown task type "worker\x1b[2J")"));
  CHECK(type.find('\x1b') == std::string::npos);
  std::string key = parse_error(R"({"cluster": {"wor\nker": ["a:1"]}})");
  CHECK(contains(key, R"(cluster key "wor\nker")"));
  CHECK(key.find('\n') == std::string::npos);
  // Raw control characters are not valid JSON; the text quoted from where the parser stopped
  // shows them escaped too.
  std::string raw = parse_error("{\"cluster\": {\"worker\": [\"a:1\a\"]}}");
  CAPTURE(raw);
  CHECK(contains(raw, "not valid JSON"));
  CHECK(raw.find('\a') == std::string::npos);
}
