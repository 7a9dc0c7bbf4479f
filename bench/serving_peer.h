// serving_bench's peer: onnxruntime-node behind Node's HTTP server (bench/serving_ort_http.js),
// serving the same model.onnx over the same REST API as est-serve, so that both are timed with
// the same clients, body and connections.
#pragma once

#include <sys/types.h>

#include <string>

namespace est::bench {

// The CPU seconds (utime + stime) of `pid` and its direct children that are alive (the Node
// primary and its workers).
double process_tree_cpu_seconds(pid_t pid);

// Starts `node SCRIPT MODEL PORT` with NODE_PATH=node_path in a process group of its own, its
// output in `log`, and waits (at most 60 s) for its `listening PORT` line; the destructor kills
// the group. UnavailableError when it exits first, DeadlineExceededError when it never listens.
class OrtHttpPeer {
 public:
  OrtHttpPeer(const std::string& node_path, const std::string& script, const std::string& model,
              int port, const std::string& log);
  ~OrtHttpPeer();
  OrtHttpPeer(const OrtHttpPeer&) = delete;
  OrtHttpPeer& operator=(const OrtHttpPeer&) = delete;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace est::bench
