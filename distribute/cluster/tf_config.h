// TF_CONFIG: the JSON environment variable that describes a multi-process job, read as
// TensorFlow reads it, and the task fields of RunConfig computed from it.
//
//   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
//                "ps": ["host3:2222"], "evaluator": ["host4:2222"]},
//    "task": {"type": "worker", "index": 1}}
//
// Rules followed: tensorflow_estimator/python/estimator/run_config.py (RunConfig's
// _init_distributed_setting_from_environment_var, _get_session_master, _count_worker,
// _get_global_id_in_cluster), tensorflow/python/distribute/estimator_training.py and
// distribute_coordinator.py (the fields under a distribution strategy), multi_worker_util.py,
// and cluster_resolver/tfconfig_cluster_resolver.py ("rpc_layer", "session_master").
//
// TensorFlow fills the fields in two ways, and so does resolve_task_fields (ChiefRule):
//   kEstimator   (RunConfig without a strategy): a cluster must have one "chief" (or a legacy
//                "master"), which alone is chief; master is "grpc://address" ("" for a cluster
//                of one task); the evaluator is not chief.
//   kMultiWorker (RunConfig with train_distribute or eval_distribute: TF's distribute
//                coordinator): the chief, or worker 0 when there is no chief, is chief; the
//                evaluator is its own chief; master and evaluation_master are
//                "<rpc_layer or grpc>://address". A cluster with a "master" uses kEstimator.
// In both, num_worker_replicas counts chief (or master) and workers, num_ps_replicas the ps
// tasks, and the evaluator sits outside the cluster: its cluster_spec is empty, both counts are
// 0, and global_id_in_cluster is unset (TF: None).
//
// Where this differs from TensorFlow (each one turns a late or silent failure into an error or a
// working default):
//   - Every malformed TF_CONFIG is an InvalidArgumentError that quotes the offending part and
//     says what to write instead (TF raises ValueError, TypeError or KeyError, or carries on).
//   - Cluster addresses are checked (see distribute/cluster/cluster_spec.h).
//   - "task" may be left out when the cluster has exactly one task: that task is meant (TF
//     requires it); with more than one task it is an error.
//   - task.index must be an integer or a string of digits (TF calls int() on it).
//   - An evaluator listed in the cluster must use an index below the number listed (TF does not
//     bound the evaluator's index).
//   - An empty or blank TF_CONFIG reads as "{}" (json.loads('') raises in TF).
//   - A job listed with no address is left out of the cluster; a task in it is an error naming
//     the job (as TF's multi_worker_util: the index exceeds the job's size), and so is a
//     cluster whose every job is empty. Strings are quoted with their control characters
//     escaped (distribute::printable_quoted).
//   - "environment" is read and ignored; "service" (TF's service key) is ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distribute/cluster/cluster_spec.h"

namespace est::distribute {

struct TfConfig {
  ClusterSpec cluster;           // "cluster"; empty: a local run
  std::optional<TaskSpec> task;  // "task", or the only task of a one-task cluster; unset: none
  std::string rpc_layer;         // "rpc_layer"; empty means "grpc"
  std::string environment;       // "environment": kept, not used
  std::optional<std::string> session_master;       // "session_master"
  std::optional<std::string> eval_session_master;  // "eval_session_master"
  std::optional<std::string> model_dir;            // "model_dir"

  bool operator==(const TfConfig& other) const = default;
};

// Parses and checks a TF_CONFIG value; InvalidArgumentError on any malformed part.
TfConfig parse_tf_config(std::string_view json);
// The TF_CONFIG environment variable's value; unset when the variable is not set.
std::optional<std::string> tf_config_from_environment();
// TF_CONFIG's JSON for a TfConfig (keys in the order above; unset ones left out), so that
// parse_tf_config(to_json(c)) == c. Launchers export it to the processes they start.
std::string to_json(const TfConfig& config);

enum class ChiefRule { kEstimator, kMultiWorker };

// The task fields of tf.estimator.RunConfig, as TensorFlow computes them from TF_CONFIG.
struct TaskFields {
  ClusterSpec cluster_spec;  // empty for a local run and for the evaluator
  TaskType task_type = TaskType::kWorker;
  int task_id = 0;
  bool is_chief = true;
  int num_worker_replicas = 1;
  int num_ps_replicas = 0;
  std::optional<int> global_id_in_cluster = 0;  // unset for the evaluator
  std::string master;
  std::string evaluation_master;
  // Not TensorFlow's: tasks of the whole TF_CONFIG cluster on this host, this one included
  // (multi_worker_util.h's num_local_tasks); processes on one host share its cores by it.
  int num_local_tasks = 1;

  bool operator==(const TaskFields& other) const = default;
};

// InvalidArgumentError when the rule cannot place the task (kEstimator and a cluster without a
// chief; an evaluator in a cluster with a "master"). `host_names` name this machine for
// num_local_tasks.
TaskFields resolve_task_fields(const TfConfig& config, ChiefRule rule,
                               const std::vector<std::string>& host_names);
TaskFields resolve_task_fields(const TfConfig& config, ChiefRule rule);  // this machine's names

}  // namespace est::distribute
