// Chief, ranks and global ids in a cluster (multi_worker_util.py, run_config.py), and the count
// of tasks on this host.
#include "distribute/cluster/multi_worker_util.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>

#include "ops/error.h"

namespace est::distribute {
namespace {

// InvalidArgumentError unless the cluster lists the task.
void check_listed(const ClusterSpec& cluster, TaskSpec task, std::string_view function) {
  if (task.index < 0 || task.index >= cluster.num_tasks(task.type))
    throw InvalidArgumentError(fmt::format(
        "{}: task {}:{} is not in the cluster {} (it has {} \"{}\" tasks)", function, task.type,
        task.index, cluster.to_string(), cluster.num_tasks(task.type), task.type));
}

std::string lowercase(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

std::string_view first_label(std::string_view host) { return host.substr(0, host.find('.')); }

bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "0.0.0.0") return true;
  if (host.substr(0, 4) != "127.") return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

}  // namespace

bool is_chief(const ClusterSpec& cluster, TaskSpec task) {
  switch (task.type) {
    case TaskType::kChief:
    case TaskType::kMaster:
    case TaskType::kEvaluator:
      return true;
    case TaskType::kWorker:
      return task.index == 0 && !cluster.has_job(TaskType::kChief) &&
             !cluster.has_job(TaskType::kMaster);
    case TaskType::kPs:
      return false;
  }
  return false;
}

int worker_count(const ClusterSpec& cluster, TaskType type) {
  switch (type) {
    case TaskType::kChief:
    case TaskType::kWorker:
      return cluster.num_tasks(TaskType::kChief) + cluster.num_tasks(TaskType::kWorker);
    case TaskType::kEvaluator:
      return std::max(1, cluster.num_tasks(TaskType::kEvaluator));
    case TaskType::kMaster:
    case TaskType::kPs:
      break;
  }
  throw InvalidArgumentError(fmt::format(
      "worker_count: a \"{}\" task has no worker count; ask it of a chief, worker or evaluator",
      type));
}

int id_in_cluster(const ClusterSpec& cluster, TaskSpec task) {
  check_listed(cluster, task, "id_in_cluster");
  switch (task.type) {
    case TaskType::kChief:
      return 0;
    case TaskType::kWorker:
      return task.index + cluster.num_tasks(TaskType::kChief);
    case TaskType::kEvaluator:
      return task.index;
    case TaskType::kMaster:
    case TaskType::kPs:
      break;
  }
  throw InvalidArgumentError(fmt::format(
      "id_in_cluster: there is no id for a \"{}\" task; only chief, worker and evaluator tasks "
      "have one (use global_id_in_cluster)",
      task.type));
}

int global_id_in_cluster(const ClusterSpec& cluster, TaskSpec task) {
  check_listed(cluster, task, "global_id_in_cluster");
  TaskType leader = cluster.has_job(TaskType::kMaster) ? TaskType::kMaster : TaskType::kChief;
  std::vector<TaskType> order;
  if (cluster.has_job(leader)) order.push_back(leader);
  for (TaskType type : cluster.jobs())  // sorted by name
    if (type != leader && type != TaskType::kPs) order.push_back(type);
  if (cluster.has_job(TaskType::kPs)) order.push_back(TaskType::kPs);
  int next_id = 0;
  for (TaskType type : order) {
    if (type == task.type) return next_id + task.index;
    next_id += cluster.num_tasks(type);
  }
  return next_id;  // unreachable: check_listed found the task
}

bool is_local_host(std::string_view host, const std::vector<std::string>& host_names) {
  std::string wanted = lowercase(host);
  if (is_loopback(wanted)) return true;
  for (const std::string& name : host_names) {
    std::string own = lowercase(name);
    if (own.empty()) continue;
    if (own == wanted) return true;
    bool one_is_short = own.find('.') == std::string::npos || wanted.find('.') == std::string::npos;
    if (one_is_short && first_label(own) == first_label(wanted)) return true;
  }
  return false;
}

std::vector<std::string> this_host_names() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return {};
  return {std::string(name)};
}

int num_local_tasks(const ClusterSpec& cluster, std::optional<TaskSpec> task,
                    const std::vector<std::string>& host_names) {
  std::vector<std::string> names = host_names;
  bool listed = task && task->index >= 0 && task->index < cluster.num_tasks(task->type);
  if (listed)
    names.push_back(parse_host_port(cluster.task_address(task->type, task->index), "cluster").host);
  int count = listed ? 0 : 1;
  for (const auto& [type, addresses] : cluster.as_map())
    for (const std::string& address : addresses)
      if (is_local_host(parse_host_port(address, "cluster").host, names)) ++count;
  return std::max(count, 1);
}

}  // namespace est::distribute
