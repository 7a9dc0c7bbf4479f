// serving_bench's servers from the outside: their CPU time from /proc, and the peer,
// onnxruntime-node behind Node's HTTP server (bench/serving_ort_http.js), started on a free port
// of 127.0.0.1 and killed with its workers.
#include "bench/serving_peer.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <est/est.h>

namespace est::bench {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

// utime + stime of /proc/PID/stat in seconds, and its parent's pid; {0, -1} when gone.
std::pair<double, pid_t> stat_of(const std::string& path) {
  const std::string text = read_all(path);
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {0, -1};
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  double ticks = 0;
  pid_t parent = -1;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 4) parent = static_cast<pid_t>(std::stol(field));
    if (index >= 14) ticks += std::stod(field);
  }
  return {ticks / static_cast<double>(sysconf(_SC_CLK_TCK)), parent};
}

}  // namespace

double cpu_seconds_of(pid_t pid) {
  return stat_of(fmt::format("/proc/{}/stat", static_cast<int>(pid))).first;
}

double process_tree_cpu_seconds(pid_t pid) {
  double total = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto [seconds, parent] = stat_of(entry.path().string() + "/stat");
    if (std::stol(name) == pid || parent == pid) total += seconds;
  }
  return total;
}

OrtHttpPeer::OrtHttpPeer(const std::string& node_path, const std::string& script,
                         const std::string& model, int port, const std::string& log)
    : port_(port) {
  std::fflush(stdout);
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group, so that the workers die with it
    if (std::freopen(log.c_str(), "w", stdout) == nullptr || dup2(fileno(stdout), 2) < 0)
      _exit(127);
    setenv("NODE_PATH", node_path.c_str(), 1);
    const std::string port_text = std::to_string(port);
    execlp("node", "node", script.c_str(), model.c_str(), port_text.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid_ < 0) throw UnavailableError("fork failed starting the onnxruntime peer");
  const std::string marker = fmt::format("listening {}", port);
  for (int i = 0; i < 600; ++i) {
    const std::string text = read_all(log);
    if (text.find(marker) != std::string::npos) return;
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      throw UnavailableError("the onnxruntime peer exited: " + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw DeadlineExceededError("the onnxruntime peer did not listen within 60 s: " + read_all(log));
}

OrtHttpPeer::~OrtHttpPeer() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

}  // namespace est::bench
