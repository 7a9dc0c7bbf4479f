// SLURM's hostlist and tasks-per-node syntax, and the cluster of an srun step (slurm.h).
#include "distribute/cluster/slurm.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

#include "ops/error.h"

extern char** environ;

namespace est::distribute {
namespace {

constexpr size_t kMaxHosts = 100'000;

[[noreturn]] void fail(const std::string& message) {
  throw InvalidArgumentError("SLURM: " + message);
}

// A non-negative decimal number of at most 9 digits, or nullopt.
std::optional<long> parse_number(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// "1-3,7" -> 1 2 3 7, each padded with zeros to the width of its range's first bound.
std::vector<std::string> expand_ranges(std::string_view ranges, std::string_view hostlist) {
  std::vector<std::string> values;
  for (const std::string& range : split(ranges, ',')) {
    size_t dash = range.find('-');
    std::string_view first = std::string_view(range).substr(0, dash);
    std::string_view last =
        dash == std::string::npos ? first : std::string_view(range).substr(dash + 1);
    auto low = parse_number(first);
    auto high = parse_number(last);
    if (!low || !high || *high < *low)
      fail(
          fmt::format("hostlist \"{}\": range \"{}\" in \"[{}]\" is not a number or an "
                      "increasing range like 1-4",
                      hostlist, range, ranges));
    if (static_cast<size_t>(*high - *low) >= kMaxHosts)
      fail(fmt::format("hostlist \"{}\": range \"{}\" names more than {} hosts", hostlist, range,
                       kMaxHosts));
    for (long value = *low; value <= *high; ++value)
      values.push_back(fmt::format("{:0{}}", value, first.size()));
  }
  return values;
}

// One comma-free name with any number of bracket groups: "rack[1-2]-n[01-02]" -> 4 names.
std::vector<std::string> expand_name(std::string_view name, std::string_view hostlist) {
  size_t open = name.find('[');
  if (open == std::string_view::npos) return {std::string(name)};
  size_t close = name.find(']', open);
  std::string_view prefix = name.substr(0, open);
  std::vector<std::string> values =
      expand_ranges(name.substr(open + 1, close - open - 1), hostlist);
  std::vector<std::string> suffixes = expand_name(name.substr(close + 1), hostlist);
  if (values.size() * suffixes.size() > kMaxHosts)
    fail(fmt::format("hostlist \"{}\" names more than {} hosts", hostlist, kMaxHosts));
  std::vector<std::string> names;
  for (const std::string& value : values)
    for (const std::string& suffix : suffixes)
      names.push_back(fmt::format("{}{}{}", prefix, value, suffix));
  return names;
}

const std::string& required(const Environment& environment, const std::string& name) {
  auto it = environment.find(name);
  if (it == environment.end() || it->second.empty())
    fail(
        fmt::format("{} is not set: this process was not started by srun inside a SLURM job "
                    "step. Launch it with `srun ...` (sbatch alone sets no step variables), or "
                    "set TF_CONFIG instead",
                    name));
  return it->second;
}

int required_number(const Environment& environment, const std::string& name) {
  const std::string& value = required(environment, name);
  auto number = parse_number(value);
  if (!number) fail(fmt::format("{}=\"{}\" is not a non-negative integer", name, value));
  return static_cast<int>(*number);
}

// For each rank, the index of its node, as srun places tasks.
std::vector<int> place_ranks(const std::vector<int>& tasks_per_node, bool cyclic) {
  std::vector<int> node_of_rank;
  if (!cyclic) {
    for (size_t node = 0; node < tasks_per_node.size(); ++node)
      node_of_rank.insert(node_of_rank.end(), tasks_per_node[node], static_cast<int>(node));
    return node_of_rank;
  }
  std::vector<int> left = tasks_per_node;
  int remaining = std::accumulate(left.begin(), left.end(), 0);
  while (remaining > 0)
    for (size_t node = 0; node < left.size(); ++node)
      if (left[node] > 0) {
        --left[node];
        --remaining;
        node_of_rank.push_back(static_cast<int>(node));
      }
  return node_of_rank;
}

}  // namespace

Environment current_environment() {
  Environment environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    size_t equals = text.find('=');
    if (equals != std::string_view::npos)
      environment.emplace(std::string(text.substr(0, equals)),
                          std::string(text.substr(equals + 1)));
  }
  return environment;
}

std::vector<std::string> expand_hostlist(std::string_view hostlist) {
  std::vector<std::string> hosts;
  std::string part;
  int depth = 0;
  auto finish_part = [&] {
    if (part.empty())
      fail(
          fmt::format("hostlist \"{}\" has an empty name (two commas in a row, or a comma at "
                      "an end)",
                      hostlist));
    for (std::string& host : expand_name(part, hostlist)) hosts.push_back(std::move(host));
    if (hosts.size() > kMaxHosts)
      fail(fmt::format("hostlist \"{}\" names more than {} hosts", hostlist, kMaxHosts));
    part.clear();
  };
  for (char c : hostlist) {
    if (c == '[' && ++depth > 1)
      fail(fmt::format("hostlist \"{}\" has a '[' inside brackets", hostlist));
    if (c == ']' && --depth < 0)
      fail(fmt::format("hostlist \"{}\" has a ']' without its '['", hostlist));
    if (c == ',' && depth == 0) {
      finish_part();
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n')
      fail(fmt::format("hostlist \"{}\" has white space in it", hostlist));
    part += c;
  }
  if (depth != 0) fail(fmt::format("hostlist \"{}\" has a '[' that is never closed", hostlist));
  finish_part();
  return hosts;
}

std::vector<int> expand_tasks_per_node(std::string_view tasks_per_node) {
  std::vector<int> counts;
  for (const std::string& part : split(tasks_per_node, ',')) {
    std::string_view text = part;
    std::string_view count_text = text;
    std::optional<long> repeat = 1;
    if (size_t open = text.find("(x"); open != std::string_view::npos) {
      count_text = text.substr(0, open);
      repeat = text.back() == ')' ? parse_number(text.substr(open + 2, text.size() - open - 3))
                                  : std::nullopt;
    }
    auto count = parse_number(count_text);
    if (!count || !repeat || *count < 1 || *repeat < 1 || *repeat > 100'000)
      fail(
          fmt::format("tasks-per-node \"{}\": part \"{}\" is not N or N(xM) with N, M >= 1 "
                      "(e.g. \"2(x3),1\")",
                      tasks_per_node, part));
    counts.insert(counts.end(), *repeat, static_cast<int>(*count));
  }
  return counts;
}

bool in_slurm_step(const Environment& environment) {
  return environment.count("SLURM_PROCID") != 0 && environment.count("SLURM_STEP_NODELIST") != 0;
}

SlurmTask resolve_slurm(const Environment& environment, const SlurmOptions& options) {
  int rank = required_number(environment, "SLURM_PROCID");
  const std::string& nodelist = required(environment, "SLURM_STEP_NODELIST");
  const std::string& tasks_text = required(environment, "SLURM_STEP_TASKS_PER_NODE");
  std::vector<std::string> hosts = expand_hostlist(nodelist);
  std::vector<int> tasks_per_node = expand_tasks_per_node(tasks_text);
  if (hosts.size() != tasks_per_node.size())
    fail(
        fmt::format("SLURM_STEP_NODELIST=\"{}\" names {} nodes but SLURM_STEP_TASKS_PER_NODE="
                    "\"{}\" gives counts for {}; they must describe the same nodes",
                    nodelist, hosts.size(), tasks_text, tasks_per_node.size()));
  std::set<std::string> distinct(hosts.begin(), hosts.end());
  if (distinct.size() != hosts.size())
    fail(fmt::format("SLURM_STEP_NODELIST=\"{}\" names a node twice", nodelist));
  int num_tasks = std::accumulate(tasks_per_node.begin(), tasks_per_node.end(), 0);
  if (auto it = environment.find("SLURM_STEP_NUM_TASKS"); it != environment.end()) {
    int declared = required_number(environment, "SLURM_STEP_NUM_TASKS");
    if (declared != num_tasks)
      fail(
          fmt::format("SLURM_STEP_NUM_TASKS={} but SLURM_STEP_TASKS_PER_NODE=\"{}\" adds up "
                      "to {}",
                      declared, tasks_text, num_tasks));
  }
  if (rank >= num_tasks)
    fail(fmt::format("SLURM_PROCID={} is out of range for a step of {} tasks", rank, num_tasks));

  bool several_per_node =
      std::any_of(tasks_per_node.begin(), tasks_per_node.end(), [](int n) { return n > 1; });
  bool cyclic = false;
  if (auto it = environment.find("SLURM_DISTRIBUTION"); it != environment.end()) {
    std::string_view method = it->second;
    method = method.substr(0, std::min(method.find(':'), method.find(',')));
    cyclic = method == "cyclic";
    if (!cyclic && method != "block" && method != "*" && !method.empty() && several_per_node)
      fail(
          fmt::format("SLURM_DISTRIBUTION=\"{}\" places tasks in an order this resolver "
                      "cannot know; run srun with --distribution=block (or cyclic)",
                      it->second));
  }
  if (options.port_base < 1 ||
      options.port_base + *std::max_element(tasks_per_node.begin(), tasks_per_node.end()) - 1 >
          65535)
    fail(fmt::format(
        "port_base {} with up to {} tasks per node goes past port 65535; choose a "
        "lower port_base",
        options.port_base, *std::max_element(tasks_per_node.begin(), tasks_per_node.end())));

  // Addresses by rank.
  std::vector<int> node_of_rank = place_ranks(tasks_per_node, cyclic);
  std::vector<int> used(hosts.size(), 0);
  std::vector<std::string> addresses;
  std::vector<int> local_index_of_rank;
  for (int node : node_of_rank) {
    local_index_of_rank.push_back(used[node]);
    addresses.push_back(fmt::format("{}:{}", hosts[node], options.port_base + used[node]++));
  }

  std::map<TaskType, int> jobs = options.jobs;
  if (jobs.empty()) jobs[TaskType::kWorker] = num_tasks;
  std::vector<std::pair<std::string_view, TaskType>> by_name;
  int requested = 0;
  for (const auto& [type, count] : jobs) {
    if (count < 0) fail(fmt::format("jobs: {} tasks of \"{}\" requested", count, type));
    requested += count;
    by_name.emplace_back(task_type_name(type), type);
  }
  if (requested != num_tasks)
    fail(
        fmt::format("the jobs ask for {} tasks but the step has {} (SLURM_STEP_TASKS_PER_NODE="
                    "\"{}\"); make them agree (srun --ntasks={})",
                    requested, num_tasks, tasks_text, requested));
  std::sort(by_name.begin(), by_name.end());

  SlurmTask result;
  ClusterSpec::Jobs cluster;
  int next_rank = 0;
  for (const auto& [name, type] : by_name) {
    int count = jobs.at(type);
    if (rank >= next_rank && rank < next_rank + count)
      result.tf_config.task = TaskSpec{type, rank - next_rank};
    cluster[type].assign(addresses.begin() + next_rank, addresses.begin() + next_rank + count);
    next_rank += count;
  }
  result.tf_config.cluster = ClusterSpec(std::move(cluster), "SLURM");
  result.rank = rank;
  result.host = hosts[node_of_rank[rank]];
  result.local_index = local_index_of_rank[rank];
  result.tasks_on_node = tasks_per_node[node_of_rank[rank]];
  if (auto it = environment.find("SLURM_LOCALID"); it != environment.end()) {
    auto local_id = parse_number(it->second);
    if (!local_id || *local_id != result.local_index)
      fail(fmt::format(
          "SLURM_LOCALID=\"{}\" but rank {} should be task {} on node {} under {} "
          "distribution; run srun with --distribution=block",
          it->second, rank, result.local_index, result.host, cyclic ? "cyclic" : "block"));
  }
  return result;
}

}  // namespace est::distribute
