// The local job's tasks, their TF_CONFIG, and free loopback ports.
#include "tools/launch/job_plan.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "ops/error.h"

namespace est::launch {

using distribute::TaskSpec;
using distribute::TaskType;

std::string task_label(TaskSpec task) { return fmt::format("{}:{}", task.type, task.index); }

std::string task_words(TaskSpec task) { return fmt::format("{} {}", task.type, task.index); }

std::vector<int> free_loopback_ports(int count) {
  std::vector<int> sockets, ports;
  auto close_all = [&] {
    for (int fd : sockets) ::close(fd);
  };
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      int error = errno;
      if (fd >= 0) ::close(fd);
      close_all();
      throw UnavailableError(
          fmt::format("cannot get a free port on 127.0.0.1 for task {} of {}: {}", i + 1, count,
                      ::strerror(error)));
    }
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  close_all();
  return ports;
}

std::vector<TaskPlan> plan_local_job(int num_workers, bool evaluator, const std::vector<int>& ports,
                                     int num_ps) {
  if (num_workers < 1)
    throw InvalidArgumentError(fmt::format(
        "-n {} asks for no training task; give -n 1 or more (the chief counts)", num_workers));
  if (num_ps < 0)
    throw InvalidArgumentError(fmt::format("--ps {}: give 0 or more ps tasks", num_ps));
  int num_tasks = num_workers + num_ps + (evaluator ? 1 : 0);
  if (static_cast<int>(ports.size()) != num_tasks)
    throw InvalidArgumentError(fmt::format("{} ports for {} tasks", ports.size(), num_tasks));
  distribute::ClusterSpec::Jobs jobs;
  for (int i = 0; i < num_workers; ++i)
    jobs[i == 0 ? TaskType::kChief : TaskType::kWorker].push_back(
        fmt::format("127.0.0.1:{}", ports[static_cast<size_t>(i)]));
  for (int i = 0; i < num_ps; ++i)
    jobs[TaskType::kPs].push_back(
        fmt::format("127.0.0.1:{}", ports[static_cast<size_t>(num_workers + i)]));
  if (evaluator) jobs[TaskType::kEvaluator].push_back(fmt::format("127.0.0.1:{}", ports.back()));
  distribute::ClusterSpec cluster(std::move(jobs), "est-launch");

  std::vector<TaskPlan> plans;
  auto add = [&](TaskSpec task, bool trains) {
    plans.push_back(TaskPlan{
        .task = task, .trains = trains, .serves = task.type == TaskType::kPs, .tf_config = {}});
    plans.back().tf_config.cluster = cluster;
    plans.back().tf_config.task = task;
  };
  add(TaskSpec{TaskType::kChief, 0}, true);
  for (int i = 0; i + 1 < num_workers; ++i) add(TaskSpec{TaskType::kWorker, i}, true);
  for (int i = 0; i < num_ps; ++i) add(TaskSpec{TaskType::kPs, i}, false);
  if (evaluator) add(TaskSpec{TaskType::kEvaluator, 0}, false);
  return plans;
}

}  // namespace est::launch
