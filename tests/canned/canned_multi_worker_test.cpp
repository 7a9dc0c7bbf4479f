// Every canned classifier and regressor under MultiWorkerMirroredStrategy: two workers of a
// loopback cluster, on threads of this process, train on their shards (per-worker batch 16,
// the global batch of 32 the other tests use); the chief's checkpoint then evaluates as well as
// single-process training does. Wide & deep runs its two optimizers, the string-label
// classifier its vocabulary, across workers.
#include <doctest/doctest.h>

#include "distribute/distribute.h"
#include "tests/canned/canned_test_util.h"
#include "tests/distribute/two_workers.h"

using namespace canned_test;
using namespace std::chrono_literals;
using est_test::TempDir;

namespace {

// Trains c on two worker threads into `model_dir`.
void train_on_two_workers(const Case& c, const std::string& model_dir) {
  testing::train_on_two_workers(
      {.token = "canned-multi-worker-test-0123456", .heartbeat_timeout = 5000ms, .bound = 180s},
      config(model_dir), [&](const RunConfig& run_config, int) {
        c.make(run_config)->train(train_input(c.task, 16), {.max_steps = 300});
      });
}

}  // namespace

TEST_CASE("every canned estimator trains under MultiWorkerMirroredStrategy") {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    TempDir dir;
    train_on_two_workers(c, dir.str());
    Metrics metrics = c.make(config(dir.str()))->evaluate(eval_input(c.task));
    check_trained(c, metrics);
  }
}
