// All-reduce across processes against the network it runs on: the ring all-reduce of the
// multi-worker runtime between N processes on this machine (loopback TCP), for buffers of
// 1 MB to 256 MB, against a plain TCP socket pair measured in the same run, in which both
// processes send and receive the same number of bytes at once (the duplex bandwidth the ring's
// links can at best reach). Target: bus bandwidth >= 0.7 of the socket pair's.
//
// The same run also measures a gRPC bidirectional stream between the two processes (chunks of
// the ring's size, both directions at once), the transport the ring could have used instead of
// raw TCP: `grpc_gbs` and `grpc_ratio` (gRPC / socket pair).
//
// Bus bandwidth is NCCL's figure: bytes / time x 2 (n - 1) / n, the bytes each task sends and
// receives in a ring all-reduce of n tasks, so it compares directly with the links' bandwidth.
//
//   collective_bench [--workers 2] [--min_mb 1] [--max_mb 256] [--repeats 5]
// Runs itself as the worker processes (`--worker_index i --ports p0,p1,...`) and prints, per
// size: `size_mb=... allreduce_busbw_gbs=... socket_gbs=... ratio=... grpc_gbs=... grpc_ratio=...`
// (medians of `repeats`).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench_stream.grpc.pb.h"
#include "distribute/cluster/cluster_runtime.h"
#include "distribute/net/coordination_client.h"
#include "distribute/net/job_token.h"
#include "distribute/net/ring.h"

namespace {

namespace dist = est::distribute;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

void tune(int fd) {
  int one = 1, size = 4 << 20;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

// The baseline: tasks 0 and 1 connect one plain socket; each sends `bytes` while it receives
// `bytes` (a thread each way), in chunks of the ring's size. Seconds per exchange, per repeat.
std::vector<double> socket_pair(dist::ClusterRuntime& runtime, size_t bytes, int repeats) {
  std::vector<double> times;
  if (runtime.rank() > 1) return times;
  int fd = -1;
  if (runtime.rank() == 1) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener, 1);
    socklen_t length = sizeof address;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    runtime.coordination().set(fmt::format("bench/socket_port/{}", bytes), std::to_string(ntohs(address.sin_port)));
    fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
  } else {
    int port = std::stoi(runtime.coordination().get(fmt::format("bench/socket_port/{}", bytes), std::chrono::seconds(30)));
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  tune(fd);
  std::vector<char> out(bytes, 1), in(bytes);
  auto exchange = [&] {
    std::thread sender([&] {
      for (size_t sent = 0; sent < bytes;) {
        size_t n = std::min(dist::Ring::kChunkBytes, bytes - sent);
        ssize_t done = ::send(fd, out.data() + sent, n, 0);
        if (done <= 0) std::abort();
        sent += static_cast<size_t>(done);
      }
    });
    for (size_t got = 0; got < bytes;) {
      ssize_t done = ::recv(fd, in.data() + got, std::min(dist::Ring::kChunkBytes, bytes - got), 0);
      if (done <= 0) std::abort();
      got += static_cast<size_t>(done);
    }
    sender.join();
  };
  exchange();  // warm-up
  for (int r = 0; r < repeats; ++r) {
    char token = 0;  // start together: a one-byte ping-pong
    if (runtime.rank() == 0) {
      ::send(fd, &token, 1, 0);
      ::recv(fd, &token, 1, MSG_WAITALL);
    } else {
      ::recv(fd, &token, 1, MSG_WAITALL);
      ::send(fd, &token, 1, 0);
    }
    auto start = Clock::now();
    exchange();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  ::close(fd);
  return times;
}

// The gRPC peer of socket_pair: task 1 serves Stream.Exchange, task 0 calls it; each side
// writes `bytes` in chunks while it reads as many. Seconds per exchange, per repeat.
class StreamService final : public est::bench::Stream::Service {
 public:
  explicit StreamService(size_t bytes) : bytes_(bytes) {}
  grpc::Status Exchange(grpc::ServerContext* /*context*/,
                        grpc::ServerReaderWriter<est::bench::Chunk, est::bench::Chunk>* stream)
      override {
    std::thread reader([&] {
      est::bench::Chunk in;
      while (stream->Read(&in)) {
      }
    });
    est::bench::Chunk out;
    for (size_t sent = 0; sent < bytes_; sent += dist::Ring::kChunkBytes) {
      out.mutable_data()->assign(std::min(dist::Ring::kChunkBytes, bytes_ - sent), 'x');
      stream->Write(out);
    }
    reader.join();
    return grpc::Status::OK;
  }

 private:
  size_t bytes_;
};

std::vector<double> grpc_stream(dist::ClusterRuntime& runtime, size_t bytes, int repeats) {
  std::vector<double> times;
  std::string key = fmt::format("bench/grpc_port/{}", bytes);
  if (runtime.rank() > 1) {  // the barrier below is the whole job's
    runtime.coordination().barrier(key + "/done", std::chrono::minutes(5));
    return times;
  }
  if (runtime.rank() == 1) {
    StreamService service(bytes);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    builder.SetMaxReceiveMessageSize(8 << 20);
    auto server = builder.BuildAndStart();
    runtime.coordination().set(key, std::to_string(port));
    runtime.coordination().barrier(key + "/done", std::chrono::minutes(5));
    server->Shutdown();
    return times;
  }
  int port = std::stoi(runtime.coordination().get(key, std::chrono::seconds(30)));
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(8 << 20);
  auto channel = grpc::CreateCustomChannel(fmt::format("127.0.0.1:{}", port),
                                           grpc::InsecureChannelCredentials(), arguments);
  auto stub = est::bench::Stream::NewStub(channel);
  auto exchange = [&] {
    grpc::ClientContext context;
    auto stream = stub->Exchange(&context);
    std::thread writer([&] {
      est::bench::Chunk out;
      for (size_t sent = 0; sent < bytes; sent += dist::Ring::kChunkBytes) {
        out.mutable_data()->assign(std::min(dist::Ring::kChunkBytes, bytes - sent), 'y');
        stream->Write(out);
      }
      stream->WritesDone();
    });
    est::bench::Chunk in;
    while (stream->Read(&in)) {
    }
    writer.join();
    stream->Finish();
  };
  exchange();  // warm-up
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    exchange();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  runtime.coordination().barrier(key + "/done", std::chrono::minutes(5));
  return times;
}

int run_worker(int index, const std::vector<int>& ports, int min_mb, int max_mb, int repeats) {
  dist::ClusterSpec::Jobs jobs;
  for (int port : ports) jobs[dist::TaskType::kWorker].push_back(fmt::format("127.0.0.1:{}", port));
  dist::ClusterRuntime runtime({.cluster = dist::ClusterSpec(jobs),
                                .task = {dist::TaskType::kWorker, index},
                                .token = dist::job_token_from_environment(),
                                .session_creation_timeout = std::chrono::seconds(60)});
  int n = runtime.world();
  for (int mb = min_mb; mb <= max_mb; mb *= 2) {
    size_t bytes = static_cast<size_t>(mb) << 20;
    std::vector<float> buffer(bytes / sizeof(float), 1.0f);
    runtime.ring().all_reduce_sum(buffer.data(), buffer.size(), est::DType::kF32, "warm-up");
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      float sync = 0;
      runtime.ring().all_reduce_sum(&sync, 1, est::DType::kF32, "sync");
      auto start = Clock::now();
      runtime.ring().all_reduce_sum(buffer.data(), buffer.size(), est::DType::kF32, "bench");
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    // Each link of the ring carries 2 (n - 1) / n of the buffer in each direction.
    size_t link_bytes = bytes * 2 * static_cast<size_t>(n - 1) / static_cast<size_t>(n);
    std::vector<double> socket_times = socket_pair(runtime, link_bytes, repeats);
    std::vector<double> grpc_times = grpc_stream(runtime, link_bytes, repeats);
    if (runtime.rank() == 0) {
      double busbw = static_cast<double>(link_bytes) / median(times) / 1e9;
      double socket = static_cast<double>(link_bytes) / median(socket_times) / 1e9;
      double grpc_rate = static_cast<double>(link_bytes) / median(grpc_times) / 1e9;
      fmt::print(
          "size_mb={} allreduce_busbw_gbs={:.2f} socket_gbs={:.2f} ratio={:.2f} grpc_gbs={:.2f} "
          "grpc_ratio={:.2f}\n",
          mb, busbw, socket, busbw / socket, grpc_rate, grpc_rate / socket);
      std::fflush(stdout);
    }
  }
  runtime.shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ring all-reduce across processes against a plain TCP socket pair"};
  int workers = 2, min_mb = 1, max_mb = 256, repeats = 5, worker_index = -1;
  std::string ports_flag;
  app.add_option("--workers", workers, "worker processes")->check(CLI::Range(2, 16));
  app.add_option("--min_mb", min_mb, "smallest buffer (MB)")->check(CLI::PositiveNumber);
  app.add_option("--max_mb", max_mb, "largest buffer (MB)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed repeats per size (median)")->check(CLI::PositiveNumber);
  app.add_option("--worker_index", worker_index, "internal: run as worker i")->group("");
  app.add_option("--ports", ports_flag, "internal: the workers' ports")->group("");
  CLI11_PARSE(app, argc, argv);

  if (worker_index >= 0) {
    std::vector<int> ports;
    for (size_t begin = 0; begin < ports_flag.size();) {
      size_t end = ports_flag.find(',', begin);
      if (end == std::string::npos) end = ports_flag.size();
      ports.push_back(std::stoi(ports_flag.substr(begin, end - begin)));
      begin = end + 1;
    }
    return run_worker(worker_index, ports, min_mb, max_mb, repeats);
  }
  std::vector<int> ports;
  for (int i = 0; i < workers; ++i) ports.push_back(free_port());
  std::string port_list;
  for (int port : ports) port_list += (port_list.empty() ? "" : ",") + std::to_string(port);
  ::setenv("EST_JOB_TOKEN", dist::generate_job_token().c_str(), 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  std::vector<pid_t> pids;
  for (int i = 0; i < workers; ++i) {
    std::vector<std::string> args = {"/proc/self/exe", "--worker_index", std::to_string(i),
                                     "--ports", port_list, "--min_mb", std::to_string(min_mb),
                                     "--max_mb", std::to_string(max_mb), "--repeats",
                                     std::to_string(repeats)};
    std::vector<char*> pointers;
    for (auto& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, pointers.data(), environ) != 0) {
      fmt::print(stderr, "cannot start worker {}\n", i);
      return 1;
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
