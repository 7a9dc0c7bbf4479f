// The multi-worker runtime inside one process: several ClusterRuntimes on threads, one per
// task of a loopback cluster, so the coordination service, the data plane and the ring
// collectives run for real (gRPC, TCP) but fast. Sums are checked against values computed
// here, and every task must hold bitwise the same result.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <future>
#include <thread>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/collectives/nccl_unique_id.h"
#include "distribute/net/coordination_client.h"
#include "distribute/net/coordination_server.h"
#include "distribute/net/job_token.h"
#include "distribute/net/ring.h"
#include "ops/error.h"
#include "tests/command.h"
#include "tests/distribute/loopback_runtime.h"
#include "tests/process_group.h"
#include "tests/skip.h"

namespace est::distribute {
namespace {

using namespace std::chrono_literals;
using testing::kToken;
using testing::loopback_cluster;
using testing::options_for;
using testing::run_tasks;

template <class T>
std::vector<T> rank_values(int rank, size_t n) {
  std::vector<T> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<T>((rank + 1) * 0.5 + (i % 97) * 0.25);
  return values;
}

}  // namespace

TEST_CASE("ring all-reduce sums over every task, bitwise the same on each") {
  for (auto [workers, chief, shared_memory] :
       {std::tuple{2, false, true}, std::tuple{2, true, true}, std::tuple{4, false, true},
        std::tuple{2, false, false}, std::tuple{3, false, false}}) {
    ClusterSpec cluster = loopback_cluster(workers, chief);
    int world = workers + (chief ? 1 : 0);
    CAPTURE(world);
    CAPTURE(shared_memory);
    // Sizes around the chunking: empty, one element, fewer elements than tasks, several chunks
    // with a ragged last one.
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{1000},
                     Ring::kChunkBytes / 4 * 3 + 17}) {
      CAPTURE(n);
      auto results = run_tasks<std::vector<float>>(
          cluster,
          [&](ClusterRuntime& runtime) {
        // Ring neighbours in one process are on one machine: shared memory unless turned off.
        CHECK(runtime.data_plane().next().shared_memory() == shared_memory);
        CHECK(runtime.data_plane().previous().shared_memory() == shared_memory);
        std::vector<float> values = rank_values<float>(runtime.rank(), n);
        runtime.ring().all_reduce_sum(values.data(), n, ops::DType::kF32, "test all-reduce");
        return values;
          },
          shared_memory);
      std::vector<float> expected(n, 0.0f);
      for (int r = 0; r < world; ++r) {
        std::vector<float> mine = rank_values<float>(r, n);
        for (size_t i = 0; i < n; ++i) expected[i] += mine[i];  // exact: quarters
      }
      for (int r = 0; r < world; ++r) {
        CHECK(results[static_cast<size_t>(r)] == expected);
        // Bitwise; memcmp takes no null pointer, even for 0 bytes (an empty vector's data()).
        if (n > 0) CHECK(std::memcmp(results[r].data(), results[0].data(), n * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("ring all-reduce of float64, broadcast from any root, all-gather of uneven blocks") {
  ClusterSpec cluster = loopback_cluster(3, false);
  struct Out {
    std::vector<double> sum;
    std::vector<char> broadcast;
    std::vector<std::string> gathered;
  };
  auto results = run_tasks<Out>(cluster, [](ClusterRuntime& runtime) {
    Out out;
    out.sum = rank_values<double>(runtime.rank(), 5000);
    runtime.ring().all_reduce_sum(out.sum.data(), out.sum.size(), ops::DType::kF64, "test");
    out.broadcast.assign(Ring::kChunkBytes * 2 + 5, static_cast<char>('a' + runtime.rank()));
    runtime.ring().broadcast(out.broadcast.data(), out.broadcast.size(), 1, "test broadcast");
    out.gathered = runtime.ring().all_gather(std::string(runtime.rank() * 1000, 'x') +
                                                 std::to_string(runtime.rank()),
                                             "test all-gather");
    return out;
  });
  for (const Out& out : results) {
    CHECK(out.sum == results[0].sum);
    CHECK(out.sum[1] == doctest::Approx(0.5 + 1.0 + 1.5 + 3 * 0.25));
    CHECK(out.broadcast == std::vector<char>(Ring::kChunkBytes * 2 + 5, 'b'));
    REQUIRE(out.gathered.size() == 3);
    for (int r = 0; r < 3; ++r)
      CHECK(out.gathered[static_cast<size_t>(r)] ==
            std::string(r * 1000, 'x') + std::to_string(r));
  }
}

TEST_CASE("a ring of two over shared memory sends on the calling thread, bitwise as before") {
  // Each collective's sends written between its receives (Ring::set_inline_sends) against the
  // sender thread: the same bytes, so the same sums. The sequence mixes collectives whose
  // sends fit in half the channel (inline) with one that does not (the sender thread), blocks
  // of different sizes on the two tasks (one inline, the other not) and broadcasts whose root
  // runs ahead, so a deadlock of the inline writes would show as a hang (every wait is bounded
  // by the runtime's health checks and the test's timeout).
  ClusterSpec cluster = loopback_cluster(2, false);
  const size_t big = DataPlane::kSharedMemoryBytes / sizeof(float);  // 2x over the inline limit
  struct Out {
    std::vector<std::vector<float>> sums;
    std::vector<std::string> gathered;
    std::vector<char> broadcast;
    uint64_t inline_collectives = 0;
  };
  auto run = [&](bool inline_sends) {
    return run_tasks<Out>(cluster, [&](ClusterRuntime& runtime) {
      Ring& ring = runtime.ring();
      ring.set_inline_sends(inline_sends);
      Out out;
      for (size_t n : {size_t{1000}, Ring::kChunkBytes / 4 * 3 + 17, big, size_t{5}}) {
        for (int repeat = 0; repeat < 3; ++repeat) {
          std::vector<float> values = rank_values<float>(runtime.rank() + repeat, n);
          for (size_t i = 0; i < n; i += 7) values[i] += 1e-3f * static_cast<float>(i % 13);
          ring.all_reduce_sum(values.data(), n, ops::DType::kF32, "test all-reduce");
          out.sums.push_back(std::move(values));
        }
      }
      // Task 1's block alone exceeds the inline limit.
      size_t block = runtime.rank() == 1 ? DataPlane::kSharedMemoryBytes * 3 / 4 : 100;
      out.gathered = ring.all_gather(std::string(block, static_cast<char>('p' + runtime.rank())),
                                     "test all-gather");
      for (int root : {0, 1, 0, 0}) {
        out.broadcast.assign(Ring::kChunkBytes + 3, static_cast<char>('a' + runtime.rank()));
        ring.broadcast(out.broadcast.data(), out.broadcast.size(), root, "test broadcast");
      }
      out.inline_collectives = ring.inline_collectives();
      return out;
    });
  };
  {
    DataPlane plane("127.0.0.1", kToken);
    CHECK(Ring(plane, 0, 1, nullptr).inline_sends());  // the default
  }
  std::vector<Out> threaded = run(false), inline_results = run(true);
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    const Out& a = threaded[static_cast<size_t>(r)];
    const Out& b = inline_results[static_cast<size_t>(r)];
    CHECK(a.inline_collectives == 0);
    CHECK(b.inline_collectives > 0);
    REQUIRE(a.sums.size() == b.sums.size());
    for (size_t k = 0; k < a.sums.size(); ++k) {
      REQUIRE(a.sums[k].size() == b.sums[k].size());
      CHECK(std::memcmp(a.sums[k].data(), b.sums[k].data(), a.sums[k].size() * sizeof(float)) ==
            0);
      CHECK(std::memcmp(b.sums[k].data(), inline_results[0].sums[k].data(),
                        b.sums[k].size() * sizeof(float)) == 0);
    }
    CHECK(a.gathered == b.gathered);
    REQUIRE(b.gathered.size() == 2);
    CHECK(b.gathered[1] == std::string(DataPlane::kSharedMemoryBytes * 3 / 4, 'q'));
    CHECK(b.broadcast == std::vector<char>(Ring::kChunkBytes + 3, 'a'));
  }
}

TEST_CASE("tasks that run different collectives fail with an error saying so, not a hang") {
  ClusterSpec cluster = loopback_cluster(2, false);
  auto results = run_tasks<std::string>(cluster, [](ClusterRuntime& runtime) {
    std::vector<float> values(runtime.rank() == 0 ? 100 : 120, 1.0f);
    try {
      runtime.ring().all_reduce_sum(values.data(), values.size(), ops::DType::kF32,
                                    "all-reduce at step 7");
    } catch (const InvalidArgumentError& error) {
      runtime.report_error(error);
      return std::string(error.what());
    } catch (const Error& error) {
      return std::string("other: ") + error.what();
    }
    return std::string("no error");
  });
  // At least one side sees the mismatch itself; the other may see it through the job's error.
  bool saw_mismatch = false;
  for (const std::string& message : results) {
    CAPTURE(message);
    CHECK(message != "no error");
    if (message.find("differs between tasks") != std::string::npos) saw_mismatch = true;
  }
  CHECK(saw_mismatch);
}

TEST_CASE("a task whose step fails stops every other task with its error") {
  ClusterSpec cluster = loopback_cluster(3, false);
  std::vector<TaskSpec> tasks = ClusterRuntime::training_tasks(cluster);
  std::vector<std::future<std::string>> futures;
  for (TaskSpec task : tasks)
    futures.push_back(std::async(std::launch::async, [&, task]() -> std::string {
      ClusterRuntime runtime(options_for(cluster, task));
      try {
        for (int step = 0; step < 1000; ++step) {
          if (runtime.rank() == 2 && step == 5)
            throw InvalidArgumentError("the loss is NaN at step 5 (injected)");
          std::vector<float> values(64, 1.0f);
          runtime.ring().all_reduce_sum(values.data(), values.size(), ops::DType::kF32,
                                        "all-reduce at step " + std::to_string(step));
        }
      } catch (const Error& error) {
        runtime.report_error(error);
        return error.what();
      }
      return "finished";
    }));
  std::vector<std::string> messages;
  for (auto& future : futures) {
    REQUIRE(future.wait_for(30s) == std::future_status::ready);
    messages.push_back(future.get());
  }
  CHECK(messages[2].find("injected") != std::string::npos);
  for (int r : {0, 1}) {
    CAPTURE(messages[static_cast<size_t>(r)]);
    CHECK(messages[static_cast<size_t>(r)].find("worker 2") != std::string::npos);
    CHECK(messages[static_cast<size_t>(r)].find("injected") != std::string::npos);
  }
}

TEST_CASE("the leader's error reaches a task that learns it only from its next heartbeat") {
  // Worker 1 is in no collective: it hears of the job's failure only from its heartbeats, one
  // a second. The leader reports an error and leaves; its service must stay up until worker 1
  // has fetched the error, or worker 1 reports the service gone instead of the leader's error.
  ClusterSpec cluster = loopback_cluster(2, false);
  auto slow = [&](int index) {
    ClusterRuntime::Options options = options_for(cluster, {TaskType::kWorker, index});
    options.heartbeat_interval = 1000ms;
    options.heartbeat_timeout = 5000ms;
    return options;
  };
  auto worker = std::async(std::launch::async, [&]() -> std::string {
    ClusterRuntime runtime(slow(1));
    auto until = std::chrono::steady_clock::now() + 20s;
    while (!runtime.coordination().has_error() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
    auto error = runtime.coordination().job_error();
    return error ? error->message : "no error";
  });
  {
    ClusterRuntime leader(slow(0));
    std::this_thread::sleep_for(300ms);  // past worker 1's first heartbeat, sent on joining
    leader.report_error(InvalidArgumentError("model_dir /tmp/x is in use (injected)"));
  }  // the leader leaves: its service stops
  REQUIRE(worker.wait_for(40s) == std::future_status::ready);
  std::string message = worker.get();
  CAPTURE(message);
  CHECK(message.find("worker 0") != std::string::npos);
  CHECK(message.find("is in use (injected)") != std::string::npos);
}

TEST_CASE("a task that never joins is named when the rendezvous times out") {
  ClusterSpec cluster = loopback_cluster(3, false);
  std::vector<std::future<std::string>> futures;
  for (int i : {0, 1})
    futures.push_back(std::async(std::launch::async, [&, i]() -> std::string {
      ClusterRuntime::Options options = options_for(cluster, {TaskType::kWorker, i});
      options.session_creation_timeout = 1500ms;
      try {
        ClusterRuntime runtime(options);
      } catch (const DeadlineExceededError& error) {
        return error.what();
      }
      return "joined";
    }));
  for (auto& future : futures) {
    REQUIRE(future.wait_for(30s) == std::future_status::ready);
    std::string message = future.get();
    CAPTURE(message);
    CHECK(message.find("worker 2 at " + cluster.task_address(TaskType::kWorker, 2)) !=
          std::string::npos);
  }
}

TEST_CASE("the coordination service refuses a call without the job token") {
  ClusterSpec cluster = loopback_cluster(1, false);
  CoordinationServer server({.address = "127.0.0.1:0",
                             .token = kToken,
                             .state = {.tasks = {"worker 0"}, .cluster_fingerprint = "c"}});
  std::string address = "127.0.0.1:" + std::to_string(server.port());
  for (std::string token : {std::string("wrong-token-0123456789"), std::string()}) {
    CoordinationClient client({.leader_address = address,
                               .leader_task = "worker 0",
                               .task = "worker 0",
                               .token = token});
    CHECK_THROWS_AS(client.register_task({.task = "worker 0", .cluster_fingerprint = "c"}, 5s),
                    PermissionDeniedError);
  }
  CoordinationClient client(
      {.leader_address = address, .leader_task = "worker 0", .task = "worker 0", .token = kToken});
  RendezvousResult joined =
      client.register_task({.task = "worker 0", .cluster_fingerprint = "c"}, 5s);
  CHECK(joined.tasks.size() == 1);
  client.shutdown(5s);
}

TEST_CASE("job tokens: from the environment, checked, generated") {
  CHECK(generate_job_token().size() == 32);
  CHECK(generate_job_token() != generate_job_token());
  CHECK(tokens_equal("abc", "abc"));
  CHECK_FALSE(tokens_equal("abc", "abd"));
  CHECK_FALSE(tokens_equal("abc", "abcd"));
  ::unsetenv(kJobTokenFileVariable);
  ::unsetenv(kJobTokenVariable);
  CHECK_THROWS_WITH_AS(job_token_from_environment(), doctest::Contains("EST_JOB_TOKEN"),
                       InvalidArgumentError);
  ::setenv(kJobTokenVariable, "short", 1);
  CHECK_THROWS_WITH_AS(job_token_from_environment(), doctest::Contains("at least 16"),
                       InvalidArgumentError);
  ::setenv(kJobTokenVariable, "0123456789abcdef", 1);
  CHECK(job_token_from_environment() == "0123456789abcdef");
  ::setenv(kJobTokenFileVariable, "/nonexistent/token", 1);
  CHECK_THROWS_WITH_AS(job_token_from_environment(), doctest::Contains("both"),
                       InvalidArgumentError);
  ::unsetenv(kJobTokenVariable);
  CHECK_THROWS_WITH_AS(job_token_from_environment(), doctest::Contains("/nonexistent/token"),
                       InvalidArgumentError);
  ::unsetenv(kJobTokenFileVariable);
}

}  // namespace est::distribute

namespace est::distribute {

TEST_CASE("with TLS certificates the job's RPCs use TLS, and a plaintext client is refused") {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0)
    return testing::skip("the openssl command is not installed (Debian: openssl)");
  testing::ScratchDir dir;
  std::string d = dir.str();
  std::string script =
      "cd " + d + " && "
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
      "-subj /CN=est-test-ca && "
      "openssl req -newkey rsa:2048 -nodes -keyout task.key -out task.csr -subj /CN=127.0.0.1 && "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n'"
      " > ext.cnf && "
      "openssl x509 -req -in task.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out task.pem "
      "-days 1 -extfile ext.cnf";
  REQUIRE(std::system((script + " > openssl.log 2>&1").c_str()) == 0);
  TlsOptions tls{.ca_certificate_path = d + "/ca.pem",
                 .certificate_path = d + "/task.pem",
                 .private_key_path = d + "/task.key"};
  ClusterSpec cluster = loopback_cluster(2, false);
  std::vector<std::future<std::vector<float>>> futures;
  for (int i : {0, 1})
    futures.push_back(std::async(std::launch::async, [&, i] {
      ClusterRuntime::Options options = options_for(cluster, {TaskType::kWorker, i});
      options.tls = tls;
      ClusterRuntime runtime(options);
      std::vector<float> values(1000, static_cast<float>(i + 1));
      runtime.ring().all_reduce_sum(values.data(), values.size(), ops::DType::kF32, "test");
      if (i == 0) {
        // A client without TLS cannot talk to the TLS service.
        CoordinationClient plain({.leader_address = cluster.task_address(TaskType::kWorker, 0),
                                  .leader_task = "worker 0",
                                  .task = "worker 1",
                                  .token = kToken});
        CHECK_THROWS_AS(plain.register_task({.task = "worker 1", .cluster_fingerprint = "x"}, 1s),
                        Error);
      }
      runtime.shutdown();
      return values;
    }));
  for (auto& future : futures) {
    REQUIRE(future.wait_for(60s) == std::future_status::ready);
    CHECK(future.get() == std::vector<float>(1000, 3.0f));
  }
  // Only some paths set is an error naming the variables.
  CHECK_THROWS_WITH_AS((TlsOptions{.certificate_path = d + "/task.pem"}.validate()),
                       doctest::Contains("EST_TLS_CA"), InvalidArgumentError);
}

TEST_CASE("the NCCL unique id travels from the chief through the coordination service") {
  // Three tasks of one job; the workers ask (and wait) while the chief may not have published
  // yet. Every task reads the chief's bytes under the key of this job's incarnation; two jobs
  // (two coordination services) have different incarnations, so a restarted job's key is new.
  std::vector<std::pair<std::string, uint64_t>> first, second;
  for (auto* results : {&first, &second})
    *results = run_tasks<std::pair<std::string, uint64_t>>(
        loopback_cluster(2, true), [](ClusterRuntime& runtime) {
          KeyValueStore store{
              .set = [&](const std::string& key,
                         const std::string& value) { runtime.coordination().set(key, value); },
              .get = [&](const std::string& key, std::chrono::milliseconds timeout) {
                return runtime.coordination().get(key, timeout);
              }};
          if (runtime.is_leader()) std::this_thread::sleep_for(200ms);  // the others wait
          std::string id = exchange_nccl_unique_id(
              store, runtime.is_leader(), runtime.job_incarnation(), 0,
              [] {
                std::string bytes(kNcclUniqueIdBytes, '\0');
                for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
                return bytes;
              },
              10s);
          return std::make_pair(id, runtime.job_incarnation());
        });
  for (const auto& results : {first, second}) {
    REQUIRE(results.size() == 3);
    for (const auto& [id, incarnation] : results) {
      CHECK(id.size() == kNcclUniqueIdBytes);
      CHECK(id == results[0].first);
      CHECK(incarnation == results[0].second);
      CHECK(incarnation != 0);
    }
  }
  CHECK(first[0].second != second[0].second);
}

}  // namespace est::distribute
