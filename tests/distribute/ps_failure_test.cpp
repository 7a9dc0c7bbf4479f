// Parameter-server jobs that must not hang (issue 27), in one process: PsServers on loopback
// ports and workers' PsClients, so the TCP protocol runs for real.
//  - the chief's connection ending before it said it was done stops the ps task with an error
//    naming it, and every other worker's next request reports it (the chief writes the
//    checkpoints: a job without it would train and save nothing);
//  - a ps task with no training task connected any more stops, saying so;
//  - a ps task that stops answering with its connection open (SIGSTOP, here a listener that
//    accepts and then says nothing) is named once its heartbeat is missing, instead of a wait
//    without end.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_server.h"
#include "nn/optimizers.h"
#include "ops/error.h"
#include "tests/distribute/ps_server_fixture.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
const std::string kToken = "0123456789abcdef0123";

PsClient connect(const std::vector<std::unique_ptr<PsServer>>& servers, const std::string& task) {
  return PsClient(PsClientOptions{.ps_addresses = testing::addresses_of(servers),
                                  .token = kToken,
                                  .task_name = task,
                                  .connect_timeout = 5s});
}

// What `client`'s pulls answer, asked every 100 ms (at most 10 s) until one fails: the
// failure's message ("" when none did). The ps task learns of a closed connection on its own
// thread, so the first pulls may still succeed.
std::string first_failure(PsClient& client) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      client.exchange({PsRequest{.kind = PsRequestKind::kPull}}, "a pull");
    } catch (const Error& error) {
      return error.what();
    }
    std::this_thread::sleep_for(100ms);
  }
  return "";
}

// A "ps task" that accepts connections and their handshake, then never answers: what a worker
// sees of a ps process stopped with SIGSTOP (the kernel keeps its connections open).
class SilentPs {
 public:
  SilentPs() : listen_fd_(listen_tcp("127.0.0.1", "0", "the silent ps")) {
    thread_ = std::thread([this] {
      while (!stopping_) {
        pollfd waiting{.fd = listen_fd_, .events = POLLIN, .revents = 0};
        if (::poll(&waiting, 1, 100) <= 0) continue;
        int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) continue;
        // The handshake: magic, token and name (each a 4-byte length and its bytes), and on a
        // requests connection the worker's shared-memory offer, answered with none.
        char magic[8];
        uint32_t n = 0;
        std::string field;
        read_exact(fd, magic, sizeof magic);
        bool requests = std::string(magic, sizeof magic) == "ESTPS001";
        for (int f = 0; f < (requests ? 3 : 2); ++f) {
          read_exact(fd, &n, sizeof n);
          field.resize(n);
          read_exact(fd, field.data(), n);
        }
        char accepted = 1;
        (void)::send(fd, &accepted, 1, MSG_NOSIGNAL);
        if (requests) {
          uint32_t no_offer = 0;
          (void)::send(fd, &no_offer, sizeof no_offer, MSG_NOSIGNAL);
        }
        fds_.push_back(fd);
      }
    });
  }
  ~SilentPs() { close(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(bound_port(listen_fd_)); }
  // Closes every connection (a wait that did not end then fails on the closed connection).
  void close() {
    if (stopping_.exchange(true)) return;
    thread_.join();
    for (int fd : fds_) ::close(fd);
    ::close(listen_fd_);
  }

 private:
  static void read_exact(int fd, void* data, size_t n) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      ssize_t got = ::recv(fd, p, n, 0);
      if (got <= 0) return;
      p += got;
      n -= static_cast<size_t>(got);
    }
  }
  int listen_fd_;
  std::atomic<bool> stopping_{false};
  std::vector<int> fds_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("ps failure: the chief's connection ends before it is done; the job stops naming it") {
  auto servers = testing::start_ps_servers(
      1, {.token = kToken, .num_workers = 3, .chief = "chief 0", .optimizer = nn::optim::sgd(0.1)});
  PsClient worker = connect(servers, "worker 0");
  {
    PsClient chief = connect(servers, "chief 0");
    chief.exchange({PsRequest{.kind = PsRequestKind::kPull}}, "a pull");
  }  // its connection closes without kEndJob, as when the process is killed
  // The other workers' next request fails with the reason instead of training on unsaved.
  std::string message = first_failure(worker);
  INFO(message);
  CHECK(message.find("the connection from the chief (chief 0) ended before it was done") !=
        std::string::npos);
  CHECK(message.find("restart the job") != std::string::npos);
  CHECK_THROWS_WITH_AS(servers[0]->join(10s), doctest::Contains("chief 0"), AbortedError);
}

TEST_CASE("ps failure: with no training task connected any more the ps task stops") {
  auto servers = testing::start_ps_servers(
      1, {.token = kToken, .num_workers = 2, .chief = "chief 0", .optimizer = nn::optim::sgd(0.1)});
  {
    PsClient worker = connect(servers, "worker 0");
    worker.exchange({PsRequest{.kind = PsRequestKind::kPull}}, "a pull");
  }  // the only training task that connected is gone (the chief never came)
  CHECK_THROWS_WITH_AS(servers[0]->join(10s),
                       doctest::Contains("no training task is connected any more (the last, "
                                         "worker 0, ended before it was done)"),
                       AbortedError);
}

TEST_CASE("ps failure: a worker that finished does not stop the job; the chief's end does") {
  auto servers = testing::start_ps_servers(
      1, {.token = kToken, .num_workers = 2, .chief = "chief 0", .optimizer = nn::optim::sgd(0.1)});
  PsClient chief = connect(servers, "chief 0");
  {
    PsClient worker = connect(servers, "worker 0");
    worker.broadcast(PsRequest{.kind = PsRequestKind::kWorkerDone, .message = "worker 0"},
                     "saying this task is done");
  }
  CHECK_THROWS_AS(servers[0]->join(300ms), DeadlineExceededError);  // the chief still trains
  chief.broadcast(PsRequest{.kind = PsRequestKind::kEndJob, .message = "chief 0"}, "ending");
  CHECK_NOTHROW(servers[0]->join(10s));
}

TEST_CASE("ps failure: a ps task that stops answering is named by the waiting worker") {
  SilentPs ps;
  const std::string address = ps.address();
  PsClient client(PsClientOptions{.ps_addresses = {address},
                                  .token = kToken,
                                  .task_name = "worker 0",
                                  .connect_timeout = 5s,
                                  .heartbeat_timeout = 1s});
  auto pull = std::async(std::launch::async, [&] {
    client.exchange({PsRequest{.kind = PsRequestKind::kPull}}, "a pull");
  });
  // Bounded: without the heartbeat the pull waits until the connection closes below.
  bool ended = pull.wait_for(30s) == std::future_status::ready;
  ps.close();
  CHECK(ended);
  std::string message;
  try {
    pull.get();
  } catch (const Error& error) {
    message = error.what();
  }
  INFO(message);
  CHECK(message.find("ps 0 at " + address + " stopped answering") != std::string::npos);
  CHECK(message.find("no heartbeat") != std::string::npos);
}

}  // namespace est::distribute
