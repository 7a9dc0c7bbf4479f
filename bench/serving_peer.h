// serving_bench's servers from the outside: the CPU time a server process has used, and the
// peer, onnxruntime-node behind Node's HTTP server (bench/serving_ort_http.js), serving the same
// model.onnx over the same REST API as est-serve, so that both are timed with the same clients,
// body and connections.
#pragma once

#include <sys/types.h>

#include <string>

namespace est::bench {

// CPU seconds `pid` has run, its threads that ended included (utime and stime of
// /proc/PID/stat): a server's own cost, apart from the clients' on the same cores. gRPC's sync
// server starts and ends threads as requests come, so the threads alive at the end do not hold
// it all. 0 when the process is gone.
double cpu_seconds_of(pid_t pid);
// The same for `pid` and its direct children that are alive (the Node primary and its workers).
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
