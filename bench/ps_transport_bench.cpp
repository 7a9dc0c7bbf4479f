// A parameter-server step's traffic over the data plane's TCP socket against gRPC (issue 18:
// "variables travel on the existing data plane, not gRPC messages, where that is faster").
// Two processes on loopback: a server that answers each request as a ps task does (it decodes
// the PsRequest of distribute/ps/ps_wire.h and encodes a PsReply holding a value for every name
// asked), and a client that sends the tutorial CNN's step (every gradient out, every value
// back: the request and reply ps_bench's workers exchange) and decodes the reply, by:
//   tcp          the data plane's Link: send_frame / receive_frame (what PsClient uses);
//   grpc_unary   one unary gRPC call per step, the encoded message in a `bytes` field;
//   grpc_stream  one bidirectional gRPC stream, one message each way per step.
// The message bytes are the same in all three, encoded into buffers reused from step to step
// where the API allows (PsClient and PsServer reuse theirs), so the figures compare transports
// only; no optimizer runs.
//
//   ps_transport_bench [--steps 200] [--rounds 5]
// Rounds interleave the three transports (tcp, grpc_unary, grpc_stream, then again), each
// timing `steps` round trips after 10 warm-up ones; lines give the median microseconds per step
// (wall clock, and the CPU time of both processes together: the figure a loaded machine
// disturbs least), the bytes per step and the rate both ways, and each transport's speed against
// tcp's (speed_vs_tcp: tcp's time / its time).
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/fashion_mnist_memory.h"
#include "distribute/distribute.h"
#include "distribute/net/data_plane.h"
#include "distribute/ps/ps_wire.h"
#include "examples/cnn_model.h"
#include "ps_transport.grpc.pb.h"

namespace {

namespace dist = est::distribute;
using Clock = std::chrono::steady_clock;
constexpr int kMaxMessage = 256 << 20;

// The tutorial CNN's trainable variables (name, value), created by one forward pass.
std::vector<dist::NamedTensor> cnn_variables() {
  dist::OneDeviceStrategy strategy("/cpu:0", 7);
  strategy.run([](dist::ReplicaContext& replica) {
    est::ModelContext& ctx = replica.model_context();
    ctx.begin_call();
    return examples::tutorial_cnn(ctx, est::Tensor::zeros({64, 28, 28, 1}));
  });
  std::vector<dist::NamedTensor> variables;
  for (const est::nn::Variable& v : strategy.store(0).trainable_variables())
    variables.push_back({v.name, v.value.clone()});
  return variables;
}

// What the server answers: a value for every name asked, as a ps task's reply to a push.
class Answer {
 public:
  Answer() {
    for (dist::NamedTensor& v : cnn_variables()) values_[v.name] = v.value;
  }
  // The reply's bytes into `out` (its capacity reused where the transport allows).
  void operator()(const std::string& request_bytes, std::string& out) const {
    dist::PsRequest request = dist::decode_request(request_bytes, "the bench client");
    dist::PsReply reply;
    reply.global_step = 1;
    for (const std::string& name : request.names) reply.tensors.push_back({name, values_.at(name)});
    dist::encode(reply, out);
  }

 private:
  std::map<std::string, est::Tensor> values_;
};

class Service final : public est::bench::PsTransport::Service {
 public:
  explicit Service(const Answer& answer) : answer_(&answer) {}
  grpc::Status Step(grpc::ServerContext*, const est::bench::PsFrame* in,
                    est::bench::PsFrame* out) override {
    (*answer_)(in->data(), *out->mutable_data());
    return grpc::Status::OK;
  }
  grpc::Status Steps(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<est::bench::PsFrame, est::bench::PsFrame>* stream) override {
    est::bench::PsFrame in, out;
    while (stream->Read(&in)) {
      (*answer_)(in.data(), *out.mutable_data());
      stream->Write(out);
    }
    return grpc::Status::OK;
  }

 private:
  const Answer* answer_;
};

int serve() {
  Answer answer;
  int listen_fd = dist::listen_tcp("127.0.0.1", "0", "the bench server");
  Service service(answer);
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &grpc_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(kMaxMessage);
  builder.SetMaxSendMessageSize(kMaxMessage);
  auto server = builder.BuildAndStart();
  fmt::print("ports={} {}\n", dist::bound_port(listen_fd), grpc_port);
  std::fflush(stdout);
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  dist::tune_socket(fd);
  dist::Link link(fd, "the bench client");
  std::string frame, reply;  // reused, as PsServer does
  try {
    for (;;) {
      dist::receive_frame(link, {}, "serving", frame);
      answer(frame, reply);
      dist::send_frame(link, reply, {}, "serving");
    }
  } catch (const est::Error&) {  // the client closed the connection: done
  }
  server->Shutdown();
  ::close(listen_fd);
  return 0;
}

// Fields of /proc/<pid>/stat for process `pid` (all its threads): CPU seconds (utime + stime)
// and minor page faults.
struct Usage {
  double cpu_seconds = 0;
  double minor_faults = 0;
};
Usage usage(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  Usage result;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 10) result.minor_faults = std::stod(field);
    if (i >= 14)
      result.cpu_seconds += std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return result;
}

// Both processes' usage.
Usage usage(pid_t client, pid_t server) {
  Usage a = usage(client), b = usage(server);
  return {a.cpu_seconds + b.cpu_seconds, a.minor_faults + b.minor_faults};
}

std::pair<int, int> read_ports(const std::string& log) {
  for (int tries = 0; tries < 600; ++tries) {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("ports=", 0) == 0) {
        int tcp = 0, grpc = 0;
        std::sscanf(line.c_str(), "ports=%d %d", &tcp, &grpc);
        return {tcp, grpc};
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw est::DeadlineExceededError("the bench server did not start within 60 s");
}

}  // namespace

int main(int argc, char** argv) try {
  int steps = 200, rounds = 5;
  bool server_role = false;
  CLI::App app("A ps step's request and reply over the data plane's TCP socket against gRPC.",
               "ps_transport_bench");
  app.add_option("--steps", steps, "timed round trips per transport and round")
      ->capture_default_str();
  app.add_option("--rounds", rounds, "interleaved rounds")->capture_default_str();
  app.add_flag("--server", server_role, "internal: the answering process")->group("");
  CLI11_PARSE(app, argc, argv);
  if (server_role) return serve();

  std::string log = fmt::format("/tmp/est_ps_transport_{}.log", ::getpid());
  std::vector<std::string> args = {"/proc/self/exe", "--server"};
  std::vector<char*> pointers;
  for (auto& arg : args) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, pointers.data(), environ) != 0)
    throw est::UnavailableError("cannot start the bench server");
  posix_spawn_file_actions_destroy(&actions);
  auto [tcp_port, grpc_port] = read_ports(log);

  // The step's request: every variable's gradient (its shape) and every name back.
  dist::PsRequest request{.kind = dist::PsRequestKind::kPushPull};
  double variables_bytes = 0;
  for (dist::NamedTensor& v : cnn_variables()) {
    variables_bytes += static_cast<double>(v.value.nbytes());
    request.names.push_back(v.name);
    request.tensors.push_back(std::move(v));
  }
  double step_bytes = 0;

  int fd = dist::connect_tcp("127.0.0.1", std::to_string(tcp_port));
  dist::tune_socket(fd);
  dist::Link link(fd, "the bench server");
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxMessage);
  arguments.SetMaxSendMessageSize(kMaxMessage);
  auto channel = grpc::CreateCustomChannel(fmt::format("127.0.0.1:{}", grpc_port),
                                           grpc::InsecureChannelCredentials(), arguments);
  auto stub = est::bench::PsTransport::NewStub(channel);
  grpc::ClientContext stream_context;
  auto stream = stub->Steps(&stream_context);

  auto check = [](const dist::PsReply& reply, size_t names) {
    if (!reply.ok() || reply.tensors.size() != names)
      throw est::InternalError("the bench server's reply is not the step's values");
  };
  // Buffers reused from step to step, as PsClient's are (gRPC's unary reply is a fresh message).
  std::string request_bytes, reply_bytes;
  est::bench::PsFrame in, out;
  std::map<std::string, std::function<void()>> transports = {
      {"tcp",
       [&] {
         dist::encode(request, request_bytes);
         step_bytes = static_cast<double>(request_bytes.size());
         dist::send_frame(link, request_bytes, {}, "a step");
         dist::receive_frame(link, {}, "a step", reply_bytes);
         step_bytes += static_cast<double>(reply_bytes.size());
         check(dist::decode_reply(reply_bytes, "the bench server"), request.names.size());
       }},
      {"grpc_unary",
       [&] {
         est::bench::PsFrame reply;
         dist::encode(request, *out.mutable_data());
         grpc::ClientContext context;
         grpc::Status status = stub->Step(&context, out, &reply);
         if (!status.ok()) throw est::UnavailableError("grpc: " + status.error_message());
         check(dist::decode_reply(reply.data(), "the bench server"), request.names.size());
       }},
      {"grpc_stream", [&] {
         dist::encode(request, *out.mutable_data());
         if (!stream->Write(out) || !stream->Read(&in))
           throw est::UnavailableError("grpc: the stream ended");
         check(dist::decode_reply(in.data(), "the bench server"), request.names.size());
       }}};
  const std::vector<std::string> order = {"tcp", "grpc_unary", "grpc_stream"};
  std::map<std::string, std::vector<double>> seconds, cpu, faults;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < order.size(); ++i) {
      // Each round starts with another transport: none always follows gRPC's busy threads.
      const std::string& name = order[(i + static_cast<size_t>(r)) % order.size()];
      for (int s = 0; s < 10; ++s) transports[name]();
      // gRPC's threads stay busy for a moment after its calls: let them settle.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      Usage before = usage(::getpid(), pid);
      Clock::time_point start = Clock::now();
      for (int s = 0; s < steps; ++s) transports[name]();
      seconds[name].push_back(std::chrono::duration<double>(Clock::now() - start).count() / steps);
      Usage after = usage(::getpid(), pid);
      cpu[name].push_back((after.cpu_seconds - before.cpu_seconds) / steps);
      faults[name].push_back((after.minor_faults - before.minor_faults) / steps);
      fmt::print("round {}: {} {:.1f} us/step, cpu {:.1f} us/step, {:.0f} page faults/step\n", r,
                 name, seconds[name].back() * 1e6, cpu[name].back() * 1e6, faults[name].back());
    }
  stream->WritesDone();
  stream->Finish();
  link = dist::Link();  // closes: the server ends
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::remove(log.c_str());

  double tcp = bench::median(seconds["tcp"]), tcp_cpu = bench::median(cpu["tcp"]);
  fmt::print("steps={} rounds={} variables_bytes={:.0f} bytes_per_step={:.0f} (both ways)\n", steps,
             rounds, variables_bytes, step_bytes);
  for (const std::string& name : order) {
    double s = bench::median(seconds[name]), c = bench::median(cpu[name]);
    fmt::print(
        "transport={} us_per_step={:.1f} gb_per_s={:.2f} speed_vs_tcp={:.3f} "
        "cpu_us_per_step={:.1f} cpu_vs_tcp={:.3f} page_faults_per_step={:.0f}\n",
        name, s * 1e6, step_bytes / s / 1e9, tcp / s, c * 1e6, c / tcp_cpu,
        bench::median(faults[name]));
  }
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
