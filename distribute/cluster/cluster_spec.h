// ClusterSpec: the tasks of a multi-process job by role (tf.train.ClusterSpec), and TaskType, the
// roles a task can have (tf.estimator.RunConfig's TaskType).
//
// TensorFlow keys a cluster by free-form job names; here the key is the TaskType enum, so code
// dispatches on roles and a misspelt job name fails where it is read instead of leaving a task
// without a role. Differences from TensorFlow's ClusterSpec, all checked when one is built, so
// every ClusterSpec in the program is well formed:
//   - job names outside chief, master, worker, ps, evaluator are refused (TF accepts any name,
//     but nothing in tf.estimator or tf.distribute gives other jobs a role);
//   - every address is host:port with a port in 1..65535 (TF does not look at addresses);
//     IPv6 hosts are bracketed, "[::1]:2222";
//   - an address appears once in the whole cluster (two tasks cannot listen on one port);
//   - at most one chief, one master, one evaluator, and not both chief and master (TF checks
//     these later, in RunConfig and multi_worker_util);
//   - a job with no addresses is dropped (TF keeps it as a job of zero tasks, which then counts
//     as "a chief job exists" and leaves a chief-less cluster without any chief).
// jobs() lists roles sorted by name, as TF's ClusterSpec.as_cluster_def() orders them.
#pragma once

#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace est::distribute {

enum class TaskType { kChief, kMaster, kWorker, kPs, kEvaluator };

// `text` in double quotes as an error message shows a value read from the configuration:
// quotes, backslashes and control characters escaped ("\a", "\n", "\x7f"), so that a stray
// control character is seen, not executed by the terminal.
std::string printable_quoted(std::string_view text);

// TensorFlow's names: "chief", "master", "worker", "ps", "evaluator".
std::string_view task_type_name(TaskType type);
// The TaskType of a name (exact, lowercase as in TF_CONFIG); nullopt for any other string.
std::optional<TaskType> task_type_from_name(std::string_view name);
// As task_type_from_name, but an unknown name is an InvalidArgumentError that quotes it, says
// where it was read (`where`, e.g. "TF_CONFIG task.type") and lists the valid names.
TaskType parse_task_type(std::string_view name, std::string_view where);

// One task of a cluster: its role and its index among the tasks of that role (TF_CONFIG's
// "task": {"type": "worker", "index": 1}).
struct TaskSpec {
  TaskType type = TaskType::kWorker;
  int index = 0;
  bool operator==(const TaskSpec& other) const = default;
};

// One address split into host and port; host keeps no brackets ("::1" for "[::1]:2222").
struct HostPort {
  std::string host;
  int port = 0;
};
// InvalidArgumentError naming `where` and quoting `address` unless it is host:port with a port
// in 1..65535.
HostPort parse_host_port(std::string_view address, std::string_view where);

class ClusterSpec {
 public:
  using Jobs = std::map<TaskType, std::vector<std::string>>;

  ClusterSpec() = default;  // empty: a local, single-process run
  // Checks the jobs as the header comment says; messages start with `origin` ("TF_CONFIG",
  // "SLURM") and name the job and index of the offending address.
  explicit ClusterSpec(Jobs jobs, std::string_view origin = "ClusterSpec");

  bool empty() const { return jobs_.empty(); }
  // The roles present, sorted by name (chief, evaluator, master, ps, worker).
  std::vector<TaskType> jobs() const;
  bool has_job(TaskType type) const { return jobs_.count(type) != 0; }
  // Number of tasks of one role (0 when absent), and of the whole cluster.
  int num_tasks(TaskType type) const;
  int num_tasks() const;
  // The addresses of one role, empty when absent.
  const std::vector<std::string>& job_tasks(TaskType type) const;
  // InvalidArgumentError when the role is absent or the index out of range.
  const std::string& task_address(TaskType type, int index) const;
  const Jobs& as_map() const { return jobs_; }

  // {"chief": ["host0:2222"], "worker": [...]}: the JSON object TF_CONFIG's "cluster" holds.
  std::string to_string() const;

  bool operator==(const ClusterSpec& other) const = default;

 private:
  Jobs jobs_;
};

}  // namespace est::distribute

// fmt::format("{}", TaskType::kPs) == "ps", so log lines and messages print TF's names.
template <>
struct fmt::formatter<est::distribute::TaskType> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(est::distribute::TaskType type, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(est::distribute::task_type_name(type), ctx);
  }
};
