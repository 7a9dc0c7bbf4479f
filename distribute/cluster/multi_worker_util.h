// Who is who in a cluster: the chief, a task's rank among the workers, its global id, and how
// many tasks share this host.
//
// Follows tensorflow/python/distribute/multi_worker_util.py (is_chief, worker_count,
// id_in_cluster) and tensorflow_estimator's run_config.py (_get_global_id_in_cluster; the same
// order as estimator_training.py's _get_global_id). Two numberings exist in TensorFlow and both
// are kept, because they differ when an evaluator is listed in the cluster:
//   - id_in_cluster: the rank among the training workers (chief 0, then worker i at i + number of
//     chiefs); the evaluator counts on its own; ps tasks have none. Collectives use this.
//   - global_id_in_cluster: RunConfig's id over every task: the chief (or master) first, then the
//     other roles sorted by name (so "evaluator" comes before "worker"), ps last.
// Differences from TF: is_chief and worker_count accept an evaluator that the cluster does not
// list (tf.estimator runs the evaluator outside the cluster; multi_worker_util would raise), and
// a legacy "master" is its cluster's chief (multi_worker_util does not know "master").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distribute/cluster/cluster_spec.h"

namespace est::distribute {

// The chief, an evaluator (its own chief), or worker 0 when the cluster has no chief or master.
bool is_chief(const ClusterSpec& cluster, TaskSpec task);

// Chief + workers for a training task; the number of evaluators (at least 1) for an evaluator;
// InvalidArgumentError for ps and master, as TF.
int worker_count(const ClusterSpec& cluster, TaskType type);

// multi_worker_util.id_in_cluster; InvalidArgumentError for ps and master tasks and for a task
// the cluster does not list.
int id_in_cluster(const ClusterSpec& cluster, TaskSpec task);

// RunConfig.global_id_in_cluster for a task listed in the cluster (InvalidArgumentError if not).
int global_id_in_cluster(const ClusterSpec& cluster, TaskSpec task);

// Whether an address's host names this machine: "localhost", 127.0.0.0/8, "::1", "0.0.0.0", or
// one of `host_names` (case-insensitive; "node1" also matches "node1.cluster.local").
bool is_local_host(std::string_view host, const std::vector<std::string>& host_names);
// This machine's names as gethostname() reports it (one entry; empty if it fails).
std::vector<std::string> this_host_names();

// How many tasks of the job run on this host, this task included (at least 1): the cluster's
// tasks whose host is local (is_local_host) or equal to this task's own host, plus this task
// when the cluster does not list it (an evaluator outside the cluster, or no cluster at all).
// Processes on one host divide its cores by this number.
int num_local_tasks(const ClusterSpec& cluster, std::optional<TaskSpec> task,
                    const std::vector<std::string>& host_names);

}  // namespace est::distribute
