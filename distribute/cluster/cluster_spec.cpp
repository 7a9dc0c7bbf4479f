// ClusterSpec and TaskType: name conversion, address checks, and the cluster's invariants.
#include "distribute/cluster/cluster_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>

#include "ops/error.h"

namespace est::distribute {
namespace {

constexpr std::array<TaskType, 5> kTaskTypes = {
    TaskType::kChief, TaskType::kMaster, TaskType::kWorker, TaskType::kPs, TaskType::kEvaluator};
constexpr std::string_view kValidNames = "\"chief\", \"master\", \"worker\", \"ps\", \"evaluator\"";

bool is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool is_ipv6_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.' || c == '%';
}

// Hosts compare case-insensitively ("Node1:2222" and "node1:2222" are one listener).
std::string canonical_address(const HostPort& host_port) {
  std::string host = host_port.host;
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return fmt::format("{}:{}", host, host_port.port);
}

}  // namespace

std::string printable_quoted(std::string_view text) {
  constexpr std::string_view kSpecial = "\"\\\a\b\f\n\r\t\v";
  constexpr std::string_view kEscape = "\"\\abfnrtv";  // what follows the backslash
  std::string out = "\"";
  for (char c : text) {
    if (size_t at = kSpecial.find(c); at != std::string_view::npos)
      out += std::string{'\\', kEscape[at]};
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + "\"";
}

std::string_view task_type_name(TaskType type) {
  switch (type) {
    case TaskType::kChief:
      return "chief";
    case TaskType::kMaster:
      return "master";
    case TaskType::kWorker:
      return "worker";
    case TaskType::kPs:
      return "ps";
    case TaskType::kEvaluator:
      return "evaluator";
  }
  return "unknown";
}

std::optional<TaskType> task_type_from_name(std::string_view name) {
  for (TaskType type : kTaskTypes)
    if (task_type_name(type) == name) return type;
  return std::nullopt;
}

TaskType parse_task_type(std::string_view name, std::string_view where) {
  if (auto type = task_type_from_name(name)) return *type;
  throw InvalidArgumentError(fmt::format("{}: unknown task type {}; use one of {}", where,
                                         printable_quoted(name), kValidNames));
}

HostPort parse_host_port(std::string_view address, std::string_view where) {
  auto fail = [&](std::string_view what) -> HostPort {
    throw InvalidArgumentError(
        fmt::format("{}: address {} {}; write it as host:port, e.g. \"localhost:2222\" or "
                    "\"[::1]:2222\"",
                    where, printable_quoted(address), what));
  };
  if (address.find("://") != std::string_view::npos)
    return fail("has a scheme (TF_CONFIG addresses have none; drop the \"grpc://\")");
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return fail("has no port");
  std::string_view host = address.substr(0, colon);
  std::string_view port_text = address.substr(colon + 1);
  HostPort result;
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return fail("has an unclosed '[' around its host");
    host = host.substr(1, host.size() - 2);
    if (!std::all_of(host.begin(), host.end(), is_ipv6_char))
      return fail("has a bracketed host that is not an IPv6 address");
  } else {
    if (host.empty()) return fail("has an empty host");
    if (host.find(':') != std::string_view::npos)
      return fail("has more than one ':' (put an IPv6 host in brackets)");
    if (!std::all_of(host.begin(), host.end(), is_host_char))
      return fail("has a host with characters other than letters, digits, '.', '-', '_'");
  }
  result.host = std::string(host);
  if (port_text.empty()) return fail("has an empty port");
  const char* end = port_text.data() + port_text.size();
  auto [ptr, error] = std::from_chars(port_text.data(), end, result.port);
  if (error != std::errc() || ptr != end || port_text.front() == '+' || result.port < 1 ||
      result.port > 65535)
    return fail(fmt::format("has port {}, not a number in 1..65535", printable_quoted(port_text)));
  return result;
}

ClusterSpec::ClusterSpec(Jobs jobs, std::string_view origin) {
  std::map<std::string, std::string> seen;  // canonical address -> where it was first listed
  for (auto& [type, addresses] : jobs) {
    if (addresses.empty()) continue;
    std::string_view name = task_type_name(type);
    for (size_t i = 0; i < addresses.size(); ++i) {
      std::string where = fmt::format("{} cluster.{}[{}]", origin, name, i);
      std::string canonical = canonical_address(parse_host_port(addresses[i], where));
      auto [it, inserted] = seen.emplace(canonical, fmt::format("cluster.{}[{}]", name, i));
      if (!inserted)
        throw InvalidArgumentError(
            fmt::format("{}: address {} is listed twice, as {} and as {}; every task needs its own "
                        "host:port",
                        origin, printable_quoted(addresses[i]), it->second,
                        fmt::format("cluster.{}[{}]", name, i)));
    }
    bool single =
        type == TaskType::kChief || type == TaskType::kMaster || type == TaskType::kEvaluator;
    if (single && addresses.size() > 1)
      throw InvalidArgumentError(fmt::format(
          "{}: cluster.{} lists {} addresses ({}); a cluster has at most one {}, list the "
          "others as \"worker\"",
          origin, name, addresses.size(), fmt::join(addresses, ", "), name));
    jobs_.emplace(type, std::move(addresses));
  }
  if (has_job(TaskType::kChief) && has_job(TaskType::kMaster))
    throw InvalidArgumentError(fmt::format(
        "{}: the cluster has both a \"chief\" ({}) and a \"master\" ({}); \"master\" is the "
        "legacy name of the chief, keep only one",
        origin, jobs_.at(TaskType::kChief)[0], jobs_.at(TaskType::kMaster)[0]));
}

std::vector<TaskType> ClusterSpec::jobs() const {
  std::vector<TaskType> types;
  for (const auto& entry : jobs_) types.push_back(entry.first);
  std::sort(types.begin(), types.end(),
            [](TaskType a, TaskType b) { return task_type_name(a) < task_type_name(b); });
  return types;
}

int ClusterSpec::num_tasks(TaskType type) const {
  auto it = jobs_.find(type);
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

int ClusterSpec::num_tasks() const {
  int total = 0;
  for (const auto& entry : jobs_) total += static_cast<int>(entry.second.size());
  return total;
}

const std::vector<std::string>& ClusterSpec::job_tasks(TaskType type) const {
  static const std::vector<std::string> kNone;
  auto it = jobs_.find(type);
  return it == jobs_.end() ? kNone : it->second;
}

const std::string& ClusterSpec::task_address(TaskType type, int index) const {
  const auto& addresses = job_tasks(type);
  if (index < 0 || index >= static_cast<int>(addresses.size()))
    throw InvalidArgumentError(
        fmt::format("ClusterSpec: no task {}:{} in the cluster {} (it has {} \"{}\" tasks)", type,
                    index, to_string(), addresses.size(), type));
  return addresses[static_cast<size_t>(index)];
}

std::string ClusterSpec::to_string() const {
  std::vector<std::string> parts;
  for (TaskType type : jobs()) {
    std::vector<std::string> quoted;
    for (const auto& address : job_tasks(type)) quoted.push_back(fmt::format("\"{}\"", address));
    parts.push_back(fmt::format("\"{}\": [{}]", type, fmt::join(quoted, ", ")));
  }
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

}  // namespace est::distribute
