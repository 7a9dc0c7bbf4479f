// The tasks est-launch starts on this machine and the TF_CONFIG of each.
//
// Layout: TensorFlow's Estimator convention with a chief. `-n N` gives
//   {"cluster": {"chief": ["127.0.0.1:p0"], "worker": ["127.0.0.1:p1", ...]},
//    "task": {"type": "chief", "index": 0}}
// so the N processes are chief:0 and worker:0..N-2. A chief is what tf.estimator expects
// (RunConfig without a strategy requires one; with MultiWorkerMirroredStrategy the chief is
// the chief either way), and it is the layout of the train_and_evaluate documentation. With
// --evaluator one more process is evaluator:0, and every task's cluster lists it:
//   {"cluster": {"chief": [...], "evaluator": ["127.0.0.1:pE"], "worker": [...]}, ...}
// (as tf.distribute's documentation of side-car evaluation and SlurmClusterResolver list it;
// the train_and_evaluate docstring leaves it out). It must be listed here: est's chief
// evaluates every checkpoint itself when its cluster has no evaluator task
// (estimator/train_and_evaluate.h), and processes on one machine divide its cores by the
// tasks the cluster lists there (multi_worker_util.h's num_local_tasks). The evaluator takes no
// part in the collectives and listens on nothing; its port is only reserved. With --ps M, M
// more processes are ps:0..M-1 (TF1's parameter servers, listed as "ps" in every task's
// cluster): they serve the variables and end by themselves when training ends; a ps task that
// fails fails the job, as a training task does.
//
// Ports: free_loopback_ports binds every socket to 127.0.0.1 port 0 at once (so the kernel
// hands out distinct ports), reads them and closes them. Another process may take a port
// between that close and the chief's bind; the chief then fails to start its service and the
// job fails (with --max-restarts it is restarted with new ports).
#pragma once

#include <string>
#include <vector>

#include "distribute/cluster/cluster_spec.h"
#include "distribute/cluster/tf_config.h"

namespace est::launch {

struct TaskPlan {
  distribute::TaskSpec task;
  bool trains = true;              // chief or worker; false for the evaluator and ps tasks
  bool serves = false;             // a ps task: its failure fails the job, like a training task
  distribute::TfConfig tf_config;  // to_json() of it is the task's TF_CONFIG
};

// "chief:0", "worker:1", "evaluator:0": the prefix of the task's output lines.
std::string task_label(distribute::TaskSpec task);
// "chief 0", "worker 1": how log lines name a task.
std::string task_words(distribute::TaskSpec task);

// `count` distinct TCP ports on 127.0.0.1 that were free a moment ago (see above).
// UnavailableError when the system cannot give them.
std::vector<int> free_loopback_ports(int count);

// The chief and the workers (`num_workers` tasks in all), `num_ps` ps tasks and, if
// `evaluator`, the evaluator, with one port each from `ports` in that order.
// InvalidArgumentError unless num_workers >= 1, num_ps >= 0 and there is one port per task.
std::vector<TaskPlan> plan_local_job(int num_workers, bool evaluator, const std::vector<int>& ports,
                                     int num_ps = 0);

}  // namespace est::launch
