// TF_CONFIG: JSON parsing and checks (nlohmann-json), serialization, and RunConfig's task fields
// under TensorFlow's two rules. See tf_config.h for the rules and where they differ from TF.
#include "distribute/cluster/tf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "distribute/cluster/multi_worker_util.h"
#include "ops/error.h"

namespace est::distribute {
namespace {

using nlohmann::json;

constexpr std::string_view kExample =
    R"({"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}})";

[[noreturn]] void fail(const std::string& message) {
  throw InvalidArgumentError("TF_CONFIG " + message);
}

// A value as it appears in TF_CONFIG, shortened when long.
std::string quote(const json& value) {
  std::string text = value.dump();
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

std::string_view type_word(const json& value) {
  if (value.is_string()) return "a string";
  if (value.is_number()) return "a number";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "null";
}

json parse_json(std::string_view text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& error) {
    std::string what = error.what();
    if (size_t bracket = what.find("] "); what.front() == '[' && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    std::string hint = text.find('\'') != std::string_view::npos
                           ? " (JSON strings take double quotes; single quotes look like a "
                             "Python dict: use json.dumps)"
                           : "";
    // The text up to where the parser stopped (error.byte counts from 1), so the message quotes
    // the offending part even when the parser's own message does not.
    size_t stop = std::min(static_cast<size_t>(error.byte), text.size());
    size_t start = stop > 40 ? stop - 40 : 0;
    std::string near = start > 0 ? "..." : "";
    for (char c : text.substr(start, stop - start))  // control characters shown, not sent
      near += static_cast<unsigned char>(c) < 0x20 || c == 0x7f
                  ? fmt::format("\\x{:02x}", static_cast<unsigned char>(c))
                  : std::string(1, c);
    fail(
        fmt::format("is not valid JSON: {}{}; the parser stopped after: {} <-- here. TF_CONFIG is "
                    "a JSON object such as {}",
                    what, hint, near, kExample));
  }
}

std::string string_field(const json& root, const char* key) {
  const json& value = root.at(key);
  if (!value.is_string())
    fail(fmt::format("\"{}\" must be a string, got {} {}", key, type_word(value), quote(value)));
  return value.get<std::string>();
}

// `empty_jobs` gets the task types listed with no address: ClusterSpec leaves them out, and
// parse_task refuses a task in one (TensorFlow's "task_id exceeds the maximum id").
ClusterSpec parse_cluster(const json& cluster, std::set<TaskType>& empty_jobs) {
  if (!cluster.is_object())
    fail(fmt::format(
        "\"cluster\" must be an object mapping task types to lists of \"host:port\", got {} {}",
        type_word(cluster), quote(cluster)));
  ClusterSpec::Jobs jobs;
  for (const auto& [name, addresses] : cluster.items()) {
    TaskType type =
        parse_task_type(name, fmt::format("TF_CONFIG cluster key {}", printable_quoted(name)));
    if (!addresses.is_array())
      fail(fmt::format("cluster.{} must be a list of \"host:port\" strings, got {} {}", name,
                       type_word(addresses), quote(addresses)));
    std::vector<std::string>& list = jobs[type];
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (!addresses[i].is_string())
        fail(fmt::format("cluster.{}[{}] must be a \"host:port\" string, got {} {}", name, i,
                         type_word(addresses[i]), quote(addresses[i])));
      list.push_back(addresses[i].get<std::string>());
    }
    if (list.empty()) empty_jobs.insert(type);
  }
  return ClusterSpec(std::move(jobs), "TF_CONFIG");
}

int parse_index(const json& index, const json& task) {
  long long value = -1;
  bool ok = false;
  if (index.is_number_integer()) {
    value = index.get<long long>();
    ok = true;
  } else if (index.is_string()) {  // TF calls int() on it, so "1" works there too
    const std::string& text = index.get_ref<const std::string&>();
    ok = !text.empty() && text.size() < 10 &&
         text.find_first_not_of("0123456789") == std::string::npos;
    if (ok) value = std::stoll(text);
  }
  if (!ok)
    fail(fmt::format("task.index must be a non-negative integer, got {} in \"task\": {}",
                     quote(index), quote(task)));
  if (value < 0 || value > 1'000'000)
    fail(fmt::format("task.index {} is out of range in \"task\": {}; it counts from 0", value,
                     quote(task)));
  return static_cast<int>(value);
}

// A task in a job that TF_CONFIG lists with no address (TensorFlow's multi_worker_util refuses
// it: the index exceeds the job's size), named.
[[noreturn]] void fail_empty_job(TaskType type, const json& task) {
  fail(
      fmt::format("cluster.{} is an empty list, so \"task\": {} is not in it; list the job's "
                  "\"host:port\" addresses (this task's among them) or correct \"task\"",
                  type, quote(task)));
}

std::optional<TaskSpec> parse_task(const json& root, const ClusterSpec& cluster,
                                   const std::set<TaskType>& empty_jobs) {
  auto it = root.find("task");
  if (it == root.end() || it->is_null()) {
    if (cluster.empty() && !empty_jobs.empty())
      fail(
          fmt::format("has a \"cluster\" whose every job is an empty list (cluster.{}); list "
                      "each job's \"host:port\" addresses",
                      *empty_jobs.begin()));
    if (cluster.empty()) return std::nullopt;
    if (cluster.num_tasks() == 1) {
      TaskType only = cluster.jobs().front();
      return TaskSpec{only, 0};
    }
    fail(
        fmt::format("has a \"cluster\" of {} tasks but no \"task\"; add \"task\": {{\"type\": ..., "
                    "\"index\": ...}} naming this process's entry in {}",
                    cluster.num_tasks(), cluster.to_string()));
  }
  const json& task = *it;
  if (!task.is_object())
    fail(
        fmt::format("\"task\" must be an object like {{\"type\": \"worker\", \"index\": 0}}, "
                    "got {} {}",
                    type_word(task), quote(task)));
  TaskSpec spec;
  auto type = task.find("type");
  auto index = task.find("index");
  if (type != task.end() && !type->is_null()) {
    if (!type->is_string())
      fail(fmt::format("task.type must be a string, got {} in \"task\": {}", quote(*type),
                       quote(task)));
    spec.type = parse_task_type(type->get<std::string>(), "TF_CONFIG task.type");
    if (empty_jobs.count(spec.type)) fail_empty_job(spec.type, task);
  } else if (!cluster.empty()) {
    fail(
        fmt::format("\"task\": {} has no \"type\"; a task in a cluster needs one of the "
                    "cluster's types ({})",
                    quote(task), cluster.to_string()));
  }
  if (empty_jobs.count(spec.type) && (type == task.end() || type->is_null()))
    fail_empty_job(spec.type, task);
  if (index != task.end() && !index->is_null()) {
    spec.index = parse_index(*index, task);
  } else if (!cluster.empty()) {
    fail(
        fmt::format("\"task\": {} has no \"index\"; add the position of this process's address "
                    "in cluster.{}",
                    quote(task), spec.type));
  }

  if (cluster.empty()) {
    if (spec.type != TaskType::kWorker || spec.index != 0)
      fail(
          fmt::format("has \"task\": {} but no \"cluster\"; without a cluster the only task is "
                      "worker 0: add a \"cluster\" that lists this task, or drop \"task\"",
                      quote(task)));
    return spec;
  }
  int count = cluster.num_tasks(spec.type);
  if (count == 0) {
    if (spec.type == TaskType::kEvaluator) return spec;  // the evaluator may sit outside
    fail(
        fmt::format("task.type \"{}\" is not in the cluster {}; add a \"{}\" list to "
                    "\"cluster\" or correct \"task\": {}",
                    spec.type, cluster.to_string(), spec.type, quote(task)));
  }
  if (spec.index >= count)
    fail(
        fmt::format("task.index {} is out of range: cluster.{} lists {} address{} ({}); use an "
                    "index in 0..{}",
                    spec.index, spec.type, count, count == 1 ? "" : "es",
                    fmt::join(cluster.job_tasks(spec.type), ", "), count - 1));
  return spec;
}

// The fields of a task outside any cluster, or of the evaluator.
TaskFields outside_cluster(TaskSpec task, bool is_chief) {
  TaskFields fields;
  fields.task_type = task.type;
  fields.task_id = task.index;
  fields.is_chief = is_chief;
  fields.num_worker_replicas = 0;
  fields.num_ps_replicas = 0;
  fields.global_id_in_cluster.reset();
  return fields;
}

}  // namespace

TfConfig parse_tf_config(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return {};
  json root = parse_json(text);
  if (!root.is_object())
    fail(fmt::format("must be a JSON object such as {}, got {} {}", kExample, type_word(root),
                     quote(root)));
  TfConfig config;
  std::set<TaskType> empty_jobs;
  if (auto it = root.find("cluster"); it != root.end() && !it->is_null())
    config.cluster = parse_cluster(*it, empty_jobs);
  config.task = parse_task(root, config.cluster, empty_jobs);
  if (root.contains("rpc_layer")) config.rpc_layer = string_field(root, "rpc_layer");
  if (root.contains("environment")) config.environment = string_field(root, "environment");
  if (root.contains("session_master")) config.session_master = string_field(root, "session_master");
  if (root.contains("eval_session_master"))
    config.eval_session_master = string_field(root, "eval_session_master");
  if (root.contains("model_dir")) {
    config.model_dir = string_field(root, "model_dir");
    if (config.model_dir->empty())
      fail("\"model_dir\" is an empty string; name a directory or leave the key out");
  }
  return config;
}

std::optional<std::string> tf_config_from_environment() {
  const char* value = std::getenv("TF_CONFIG");
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string to_json(const TfConfig& config) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!config.cluster.empty()) {
    nlohmann::ordered_json cluster = nlohmann::ordered_json::object();
    for (TaskType type : config.cluster.jobs())
      cluster[std::string(task_type_name(type))] = config.cluster.job_tasks(type);
    root["cluster"] = cluster;
  }
  if (config.task)
    root["task"] = {{"type", std::string(task_type_name(config.task->type))},
                    {"index", config.task->index}};
  if (!config.rpc_layer.empty()) root["rpc_layer"] = config.rpc_layer;
  if (!config.environment.empty()) root["environment"] = config.environment;
  if (config.session_master) root["session_master"] = *config.session_master;
  if (config.eval_session_master) root["eval_session_master"] = *config.eval_session_master;
  if (config.model_dir) root["model_dir"] = *config.model_dir;
  return root.dump();
}

TaskFields resolve_task_fields(const TfConfig& config, ChiefRule rule,
                               const std::vector<std::string>& host_names) {
  const ClusterSpec& cluster = config.cluster;
  TaskFields fields;
  fields.num_local_tasks = num_local_tasks(cluster, config.task, host_names);
  if (cluster.empty()) {  // local: one worker that is its own chief
    fields.master = config.session_master.value_or("");
    fields.evaluation_master = config.eval_session_master.value_or("");
    return fields;
  }
  TaskSpec task = *config.task;  // parse_tf_config sets it whenever there is a cluster
  bool legacy_master = cluster.has_job(TaskType::kMaster);
  if (legacy_master && task.type == TaskType::kEvaluator)
    fail(
        fmt::format("task.type \"evaluator\" cannot be used with a \"master\" in the cluster {} "
                    "(TensorFlow refuses it too); rename \"master\" to \"chief\"",
                    cluster.to_string()));
  if (rule == ChiefRule::kEstimator || legacy_master) {
    TaskType leader = legacy_master ? TaskType::kMaster : TaskType::kChief;
    if (!cluster.has_job(leader))
      fail(fmt::format(
          "cluster {} has no \"chief\"; without a distribution strategy a cluster needs one chief "
          "task (add \"chief\": [\"host:port\"]), or set RunConfig::train_distribute to a "
          "multi-worker strategy, under which worker 0 is the chief; set it before "
          "RunConfig::with_tf_config, which picks the chief by it "
          "(RunConfig{{.train_distribute = ...}}.with_tf_config(...))",
          cluster.to_string()));
    if (task.type == TaskType::kEvaluator) {
      TaskFields evaluator = outside_cluster(task, /*is_chief=*/false);
      evaluator.evaluation_master = config.eval_session_master.value_or("");
      evaluator.num_local_tasks = fields.num_local_tasks;
      return evaluator;
    }
    fields.is_chief = task.type == leader;
    fields.master = config.session_master ? *config.session_master
                    : cluster.num_tasks() == 1
                        ? ""
                        : "grpc://" + cluster.task_address(task.type, task.index);
    fields.num_worker_replicas = cluster.num_tasks(TaskType::kWorker) + cluster.num_tasks(leader);
  } else {
    if (task.type == TaskType::kEvaluator) {
      TaskFields evaluator = outside_cluster(task, /*is_chief=*/true);
      evaluator.num_local_tasks = fields.num_local_tasks;
      return evaluator;
    }
    fields.is_chief = is_chief(cluster, task);
    std::string scheme = config.rpc_layer.empty() ? "grpc" : config.rpc_layer;
    fields.master = scheme + "://" + cluster.task_address(task.type, task.index);
    fields.evaluation_master = fields.master;
    fields.num_worker_replicas =
        cluster.num_tasks(TaskType::kWorker) + cluster.num_tasks(TaskType::kChief);
  }
  fields.cluster_spec = cluster;
  fields.task_type = task.type;
  fields.task_id = task.index;
  fields.num_ps_replicas = cluster.num_tasks(TaskType::kPs);
  fields.global_id_in_cluster = global_id_in_cluster(cluster, task);
  return fields;
}

TaskFields resolve_task_fields(const TfConfig& config, ChiefRule rule) {
  return resolve_task_fields(config, rule, this_host_names());
}

}  // namespace est::distribute
