// SLURM: the TF_CONFIG of a process started by `srun`, built from SLURM's environment as
// tf.distribute.cluster_resolver.SlurmClusterResolver builds its cluster
// (tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver.py).
//
// Read: SLURM_PROCID (this task's rank), SLURM_STEP_NODELIST (hostlist syntax, "node[01-03,7]"),
// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of 3 nodes, then 1), and, when set,
// SLURM_STEP_NUM_TASKS, SLURM_DISTRIBUTION and SLURM_LOCALID as checks. Tasks on one node listen
// on port_base, port_base + 1, ... in rank order. With the default jobs every task is a
// "worker" (SlurmClusterResolver's default), so rank 0 is worker 0, the chief under
// MultiWorkerMirroredStrategy; other jobs ({chief: 1, worker: 3}, {ps: 1, worker: 4}) take the
// ranks in the order of their names (chief, evaluator, master, ps, worker), as TF's sorted(jobs).
//
// Differences from TensorFlow:
//   - Nodes keep SLURM's order (the node list's order, in which srun's default block
//     distribution places ranks); TF sorts host names as strings, which puts "n10" before "n9"
//     and then gives rank 0 the address of a node it does not run on.
//   - With --distribution=cyclic, ranks go round-robin over the nodes, as srun places them (TF
//     assumes block); plane and arbitrary distributions with several tasks on a node are
//     refused. When SLURM_LOCALID is set it must agree with the computed placement.
//   - Malformed variables, a node list and tasks-per-node of different lengths (TF zips them,
//     dropping the rest), a duplicate node, a rank out of range or ports past 65535 are
//     InvalidArgumentErrors that quote the variable; TF raises RuntimeError or ValueError, or
//     carries on.
//   - GPUs are not assigned and the environment is not changed (TF sets CUDA_VISIBLE_DEVICES);
//     local_index is there for a caller that wants to pick a device.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "distribute/cluster/cluster_spec.h"
#include "distribute/cluster/tf_config.h"

namespace est::distribute {

using Environment = std::map<std::string, std::string>;

// This process's environment variables.
Environment current_environment();

// "n[1-2],m5,o[009-011]" -> n1 n2 m5 o009 o010 o011: order kept, ranges inclusive, zero padding
// kept at the width of a range's first bound, several bracket groups in one name multiplied out.
// InvalidArgumentError naming the bad part (unbalanced brackets, reversed or non-numeric range).
std::vector<std::string> expand_hostlist(std::string_view hostlist);
// "3(x2),2,1" -> 3 3 2 1. InvalidArgumentError naming the bad part.
std::vector<int> expand_tasks_per_node(std::string_view tasks_per_node);

struct SlurmOptions {
  int port_base = 8888;  // SlurmClusterResolver's default
  // Tasks per role; their sum must be the number of tasks. Empty: every task is a "worker".
  std::map<TaskType, int> jobs;
};

struct SlurmTask {
  TfConfig tf_config;   // the cluster and this process's task; to_json() gives TF_CONFIG
  int rank = 0;         // SLURM_PROCID
  std::string host;     // the node this task runs on
  int local_index = 0;  // its place among the tasks on that node (port = port_base + local_index)
  int tasks_on_node = 1;
};

// Whether the environment is that of a task started by srun (SLURM_PROCID and
// SLURM_STEP_NODELIST are set).
bool in_slurm_step(const Environment& environment);

// The cluster and task of this srun task. InvalidArgumentError (naming the variable and quoting
// its value) when a variable is missing or malformed, or the options do not fit the step.
SlurmTask resolve_slurm(const Environment& environment, const SlurmOptions& options = {});

}  // namespace est::distribute
