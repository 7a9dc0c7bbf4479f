// The NCCL unique id's exchange through a key-value store (a fake of the coordination
// service's): the chief publishes, the others read under the same job-scoped key, a restarted
// job (new incarnation) never reads the id of the job before it, and a malformed id is a
// DataLossError. Runs without a GPU; the NCCL communicator itself is in test_distribute_gpu.
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <vector>

#include "distribute/collectives/nccl_unique_id.h"
#include "ops/error.h"

namespace est::distribute {
namespace {

// A key-value store whose get fails at once (DeadlineExceededError) for a missing key, as the
// coordination service's does when the timeout passes.
struct FakeStore {
  std::mutex mutex;
  std::map<std::string, std::string> values;
  int gets = 0;
  KeyValueStore store() {
    return {.set =
                [this](const std::string& key, const std::string& value) {
                  std::lock_guard lock(mutex);
                  values[key] = value;
                },
            .get = [this](const std::string& key, std::chrono::milliseconds) -> std::string {
              std::lock_guard lock(mutex);
              ++gets;
              auto found = values.find(key);
              if (found == values.end())
                throw DeadlineExceededError("key '" + key + "' was not set in time");
              return found->second;
            }};
  }
};

std::string id_of(char fill) { return std::string(kNcclUniqueIdBytes, fill); }

}  // namespace

TEST_CASE("nccl unique id: the key names the job's incarnation and the communicator") {
  CHECK(nccl_unique_id_key(0xc0ffee, 0) == "nccl/unique_id/job-0000000000c0ffee/comm-0");
  CHECK(nccl_unique_id_key(0xc0ffee, 2) != nccl_unique_id_key(0xc0ffee, 0));
  CHECK(nccl_unique_id_key(1, 0) != nccl_unique_id_key(2, 0));
}

TEST_CASE("nccl unique id: the chief publishes it and every worker reads the same bytes") {
  FakeStore fake;
  int made = 0;
  auto make = [&] {
    ++made;
    return id_of('\x07');
  };
  std::string chief =
      exchange_nccl_unique_id(fake.store(), true, 42, 0, make, std::chrono::milliseconds(100));
  CHECK(made == 1);
  CHECK(fake.values.count(nccl_unique_id_key(42, 0)) == 1);
  for (int worker = 1; worker < 3; ++worker) {
    std::string mine =
        exchange_nccl_unique_id(fake.store(), false, 42, 0, make, std::chrono::milliseconds(100));
    CHECK(mine == chief);
  }
  CHECK(made == 1);  // only the chief makes an id
  CHECK(fake.gets == 2);
}

TEST_CASE("nccl unique id: a restarted job never reads the id of the job before it") {
  FakeStore fake;
  exchange_nccl_unique_id(
      fake.store(), true, 1, 0, [] { return id_of('a'); }, std::chrono::milliseconds(100));
  // The restarted job's worker asks before its chief has published: it waits (here: fails at
  // once) instead of taking the old job's id.
  CHECK_THROWS_AS(
      exchange_nccl_unique_id(
          fake.store(), false, 2, 0, [] { return id_of('x'); }, std::chrono::milliseconds(100)),
      DeadlineExceededError);
  exchange_nccl_unique_id(
      fake.store(), true, 2, 0, [] { return id_of('b'); }, std::chrono::milliseconds(100));
  CHECK(exchange_nccl_unique_id(
            fake.store(), false, 2, 0, [] { return id_of('x'); }, std::chrono::milliseconds(100)) ==
        id_of('b'));
}

TEST_CASE("nccl unique id: an id of the wrong size is a DataLossError naming the key") {
  FakeStore fake;
  fake.values[nccl_unique_id_key(5, 0)] = "short";
  try {
    exchange_nccl_unique_id(
        fake.store(), false, 5, 0, [] { return id_of('x'); }, std::chrono::milliseconds(100));
    FAIL("no error");
  } catch (const DataLossError& error) {
    CHECK(std::string(error.what()).find(nccl_unique_id_key(5, 0)) != std::string::npos);
    CHECK(std::string(error.what()).find("5 bytes, not 128") != std::string::npos);
  }
  // The chief does not publish a malformed id.
  CHECK_THROWS_AS(exchange_nccl_unique_id(
                      fake.store(), true, 6, 0, [] { return std::string(3, 'x'); },
                      std::chrono::milliseconds(100)),
                  DataLossError);
  CHECK(fake.values.count(nccl_unique_id_key(6, 0)) == 0);
}

TEST_CASE("nccl choice: every task's GPUs, distinct per machine, or the reason why not") {
  std::vector<std::string> tasks{"worker 0 at a:1", "worker 1 at b:2", "worker 2 at c:3"};
  CHECK(nccl_capability("m1", true, {"0000:1A:00.0", "0000:1B:00.0"}) ==
        "m1\tyes\t0000:1A:00.0,0000:1B:00.0");
  CHECK(nccl_capability("m1", false, {"ignored"}) == "m1\tno\t");
  // Distinct machines may use the same bus ids; one machine's GPUs must differ.
  CHECK(nccl_unusable_reason({nccl_capability("m1", true, {"0000:1A:00.0"}),
                              nccl_capability("m2", true, {"0000:1A:00.0"}),
                              nccl_capability("m1", true, {"0000:1B:00.0"})},
                             tasks) == "");
  std::string shared = nccl_unusable_reason(
      {nccl_capability("m1", true, {"0000:1A:00.0"}), nccl_capability("m2", true, {"0000:1A:00.0"}),
       nccl_capability("m1", true, {"0000:1A:00.0"})},
      tasks);
  CHECK(shared.find("worker 0 at a:1 and worker 2 at c:3 share GPU 0000:1A:00.0 on host m1") !=
        std::string::npos);
  CHECK(shared.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  std::string cpu = nccl_unusable_reason(
      {nccl_capability("m1", true, {"0000:1A:00.0"}), nccl_capability("m2", false, {})}, tasks);
  CHECK(cpu.find("worker 1 at b:2 has devices other than GPUs") != std::string::npos);
}

}  // namespace est::distribute
