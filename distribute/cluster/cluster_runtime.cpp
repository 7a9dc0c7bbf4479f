// ClusterRuntime: bring-up (server, client, data plane, rendezvous, ring), the health check,
// error reports and the orderly shutdown.
#include "distribute/cluster/cluster_runtime.h"

#include <fmt/format.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>

#include "distribute/net/coordination_client.h"
#include "distribute/net/coordination_server.h"
#include "distribute/net/ring.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

constexpr auto kFinishedGrace = std::chrono::seconds(3);

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

std::vector<TaskSpec> ClusterRuntime::training_tasks(const ClusterSpec& cluster) {
  std::vector<TaskSpec> tasks;
  for (int i = 0; i < cluster.num_tasks(TaskType::kChief); ++i)
    tasks.push_back({TaskType::kChief, i});
  for (int i = 0; i < cluster.num_tasks(TaskType::kWorker); ++i)
    tasks.push_back({TaskType::kWorker, i});
  return tasks;
}

std::string ClusterRuntime::task_name(TaskSpec task) {
  return fmt::format("{} {}", task.type, task.index);
}

std::string ClusterRuntime::describe(int rank) const {
  return fmt::format("{} at {}", names_[static_cast<size_t>(rank)],
                     addresses_[static_cast<size_t>(rank)]);
}

ClusterRuntime::ClusterRuntime(Options options) : options_(std::move(options)) {
  std::vector<TaskSpec> tasks = training_tasks(options_.cluster);
  rank_ = -1;
  for (size_t r = 0; r < tasks.size(); ++r) {
    names_.push_back(task_name(tasks[r]));
    addresses_.push_back(options_.cluster.task_address(tasks[r].type, tasks[r].index));
    if (tasks[r] == options_.task) rank_ = static_cast<int>(r);
  }
  if (rank_ < 0)
    throw InvalidArgumentError(fmt::format(
        "{} takes no part in the job's collectives: only the chief and the workers of TF_CONFIG's "
        "cluster train under MultiWorkerMirroredStrategy (cluster: {})",
        task_name(options_.task), options_.cluster.to_string()));
  options_.tls.validate();
  const std::string& own_address = addresses_[static_cast<size_t>(rank_)];
  std::string fingerprint = options_.cluster.to_string();
  if (rank_ == 0) {
    CoordinationState::Options state{.tasks = names_,
                                     .addresses = addresses_,
                                     .cluster_fingerprint = fingerprint,
                                     .heartbeat_timeout = options_.heartbeat_timeout};
    server_ = std::make_unique<CoordinationServer>(CoordinationServer::Options{
        .address = own_address, .token = options_.token, .tls = options_.tls, .state = state});
  }
  client_ = std::make_unique<CoordinationClient>(
      CoordinationClient::Options{.leader_address = addresses_[0],
                                  .leader_task = names_[0],
                                  .task = task_name(),
                                  .token = options_.token,
                                  .tls = options_.tls,
                                  .heartbeat_interval = options_.heartbeat_interval,
                                  .heartbeat_timeout = options_.heartbeat_timeout});
  plane_ = std::make_unique<DataPlane>(parse_host_port(own_address, "TF_CONFIG").host,
                                       options_.token, options_.shared_memory);
  auto started = std::chrono::steady_clock::now();
  RendezvousResult joined = client_->register_task(
      {.task = task_name(),
       .cluster_fingerprint = fingerprint,
       .data_address = plane_->address(),
       .host = host_name(),
       .pid = static_cast<int64_t>(getpid())},
      options_.session_creation_timeout);
  job_incarnation_ = joined.job_incarnation;
  std::vector<std::string> data_addresses;
  for (const TaskRegistration& task : joined.tasks) data_addresses.push_back(task.data_address);
  std::vector<std::string> descriptions;
  for (int r = 0; r < world(); ++r) descriptions.push_back(describe(r));
  plane_->connect_ring(rank_, data_addresses, descriptions, joined.job_incarnation,
                       options_.session_creation_timeout, health());
  ring_ = std::make_unique<Ring>(*plane_, rank_, world(), health());
  log::info("All {} tasks of the job have joined ({} is rank {}) after {:.2f} s.", world(),
            task_name(), rank_,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

ClusterRuntime::~ClusterRuntime() {
  if (!shut_down_ && !reported_ && client_)
    client_->report_error(JobStatus::error(
        StatusCode::kAborted,
        fmt::format("{} stopped before the end of the job (its process is leaving with an "
                    "error; see its log)",
                    describe(rank_)),
        task_name()));
  ring_.reset();   // joins the sender thread
  plane_.reset();  // closes the links
  client_.reset();  // stops the heartbeats
  // After a failure the service stays up until every task has fetched the error (a task not in
  // a collective learns it only at its next heartbeat, or joins late), for at most two
  // heartbeat intervals and a second.
  if (server_)
    server_->stop(shut_down_ ? std::chrono::milliseconds(2000)
                             : 2 * options_.heartbeat_interval + std::chrono::milliseconds(1000));
}

HealthCheck ClusterRuntime::health() const {
  // A task that has entered the shutdown barrier will send nothing more. Its last data may
  // still be on the way, so it counts as gone only after a grace period.
  struct Finished {
    std::mutex mutex;
    std::map<std::string, std::chrono::steady_clock::time_point> seen;
  };
  auto finished = std::make_shared<Finished>();
  CoordinationClient* client = client_.get();
  std::string self = task_name();
  std::vector<std::string> names = names_, addresses = addresses_;
  return [=](bool peer_closed) -> std::optional<JobStatus> {
    if (peer_closed) return client->poll_now(std::chrono::milliseconds(2000));
    if (client->has_error()) return client->job_error();
    std::set<std::string> done = client->finished_tasks();
    if (done.empty()) return std::nullopt;
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(finished->mutex);
    for (size_t r = 0; r < names.size(); ++r) {
      if (names[r] == self || !done.count(names[r])) continue;
      auto [it, inserted] = finished->seen.emplace(names[r], now);
      if (now - it->second > kFinishedGrace)
        return JobStatus::error(
            StatusCode::kFailedPrecondition,
            fmt::format("{} at {} has finished the job (it left its training loop) while this task "
                        "still waits for it: the workers ran different numbers of steps; give "
                        "every worker the same max_steps and an input that does not end first",
                        names[r], addresses[r]),
            names[r]);
    }
    return std::nullopt;
  };
}

void ClusterRuntime::report_error(const std::exception& error) noexcept {
  if (reported_ || !client_) return;
  reported_ = true;
  // An error that came from the job (another task's failure) is not reported back.
  if (client_->has_error()) return;
  StatusCode code = StatusCode::kUnknown;
  if (const auto* est_error = dynamic_cast<const Error*>(&error)) code = est_error->code();
  client_->report_error(JobStatus::error(
      code, fmt::format("{} failed: {}", describe(rank_), error.what()), task_name()));
}

void ClusterRuntime::shutdown() {
  if (shut_down_) return;
  client_->shutdown(options_.shutdown_timeout);
  shut_down_ = true;
}

}  // namespace est::distribute
