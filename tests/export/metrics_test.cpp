// The metrics' Prometheus text as TF Serving's prometheus_exporter.cc writes it (names, TYPE
// lines, label escapes, cumulative buckets as TF's Histogram fills them, _sum and _count),
// TF Serving's metric names and labels as est-serve records them, and the REST paths TF
// Serving counts.
#include <doctest/doctest.h>

#include <cmath>

#include "export/metrics.h"
#include "export/serving_metrics.h"
#include "ops/error.h"

namespace {

using namespace est::serving;
using metrics::Kind;

}  // namespace

TEST_CASE("metrics: Prometheus's text exposition format, as TF Serving exports it") {
  metrics::Registry registry({
      {"/tensorflow/serving/request_count", Kind::kCounter, {"model_name", "status"}, {}},
      {"/tensorflow/serving/request_latency",
       Kind::kHistogram,
       {"model_name", "API", "entrypoint"},
       metrics::exponential_buckets(10, 1.8, 3)},
      {"/tensorflow/serving/batching_session/wrapped_run_count", Kind::kCounter, {}, {}},
      {"/a/gauge", Kind::kGauge, {"x"}, {}},
  });
  registry.increment("/tensorflow/serving/request_count", {"half\"plus\\two", "OK"});
  registry.increment("/tensorflow/serving/request_count", {"half\"plus\\two", "OK"}, 2);
  registry.increment("/tensorflow/serving/request_count", {"m", "NOT_FOUND"});
  registry.observe("/tensorflow/serving/request_latency", {"m", "predict", "REST"}, 5);
  registry.observe("/tensorflow/serving/request_latency", {"m", "predict", "REST"}, 18);  // > 18
  registry.observe("/tensorflow/serving/request_latency", {"m", "predict", "REST"}, 1000);
  registry.set("/a/gauge", {"1"}, -4);
  CHECK(registry.exposition() ==
        "# TYPE :a:gauge gauge\n"
        ":a:gauge{x=\"1\"} -4\n"
        "# TYPE :tensorflow:serving:batching_session:wrapped_run_count counter\n"
        "# TYPE :tensorflow:serving:request_count counter\n"
        ":tensorflow:serving:request_count{model_name=\"half\\\"plus\\\\two\",status=\"OK\"} 3\n"
        ":tensorflow:serving:request_count{model_name=\"m\",status=\"NOT_FOUND\"} 1\n"
        "# TYPE :tensorflow:serving:request_latency histogram\n"
        ":tensorflow:serving:request_latency_bucket{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\",le=\"10\"} 1\n"
        ":tensorflow:serving:request_latency_bucket{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\",le=\"18\"} 1\n"
        ":tensorflow:serving:request_latency_bucket{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\",le=\"32.4\"} 2\n"
        ":tensorflow:serving:request_latency_bucket{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\",le=\"+Inf\"} 3\n"
        ":tensorflow:serving:request_latency_sum{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\"} 1023\n"
        ":tensorflow:serving:request_latency_count{model_name=\"m\",API=\"predict\","
        "entrypoint=\"REST\"} 3\n");
  registry.increment("/tensorflow/serving/batching_session/wrapped_run_count", {});
  CHECK(registry.exposition().find(
            ":tensorflow:serving:batching_session:wrapped_run_count{} 1\n") != std::string::npos);
  CHECK(registry.value("/tensorflow/serving/request_count", {"m", "NOT_FOUND"}) == 1);
  // A caller's mistakes are errors, never a crash.
  CHECK_THROWS_AS(registry.increment("/no/such", {}), est::InvalidArgumentError);
  CHECK_THROWS_AS(registry.increment("/tensorflow/serving/request_count", {"m"}),
                  est::InvalidArgumentError);
  CHECK_THROWS_AS(registry.observe("/tensorflow/serving/request_count", {"m", "OK"}, 1),
                  est::InvalidArgumentError);
}

TEST_CASE("metrics: TF metric names made Prometheus names; exponential buckets as TF's") {
  CHECK(metrics::prometheus_name("/tensorflow/cc/saved_model/load_attempt_count") ==
        ":tensorflow:cc:saved_model:load_attempt_count");
  CHECK(metrics::prometheus_name("9a-b") == "_9a:b");
  const std::vector<double> buckets = metrics::exponential_buckets(10, 1.8, 33);
  REQUIRE(buckets.size() == 33);
  CHECK(buckets[1] == doctest::Approx(18));
  CHECK(buckets[32] == doctest::Approx(10 * std::pow(1.8, 32)));
}

TEST_CASE("metrics: TF Serving's request metrics, counted by model and status") {
  const std::string count = "/tensorflow/serving/request_count";
  const int64_t ok = serving_metrics().value(count, {"metrics_test", "OK"});
  record_request("metrics_test", "OK", "predict", "REST", 120);
  record_request("metrics_test", "INVALID_ARGUMENT", "predict", "REST", 30);
  CHECK(serving_metrics().value(count, {"metrics_test", "OK"}) == ok + 1);
  CHECK(serving_metrics().value(count, {"metrics_test", "INVALID_ARGUMENT"}) >= 1);
  // Only successful requests have a latency, as in TF Serving's http_server.cc.
  CHECK(serving_metrics().value("/tensorflow/serving/request_latency",
                                {"metrics_test", "predict", "REST"}) == ok + 1);
  const std::string page = serving_metrics().exposition();
  for (const char* name :
       {":tensorflow:serving:request_count", ":tensorflow:serving:request_latency",
        ":tensorflow:serving:runtime_latency",
        ":tensorflow:serving:batching_session:queuing_latency",
        ":tensorflow:cc:saved_model:load_attempt_count",
        ":tensorflow:serving:model_warmup_latency"})
    CHECK(page.find(std::string("# TYPE ") + name + " ") != std::string::npos);
}

TEST_CASE("metrics: the REST paths TF Serving counts, with their model name and API") {
  auto labels = [](std::string_view path) {
    auto found = rest_request_labels(path);
    return found ? found->model_name + "|" + found->api : std::string("none");
  };
  CHECK(labels("/v1/models/half") == "half|");
  CHECK(labels("/V1/Models/half/versions/12:predict") == "half|predict");
  CHECK(labels("/v1/models/half/labels/stable:classify") == "half|classify");
  CHECK(labels("/v1/models/half/versions/1/metadata") == "half|");
  CHECK(labels("/v1/models/half:regress") == "half|regress");
  CHECK(labels("/v1/models/half/versions/x:predict") == "none");
  CHECK(labels("/v1/models/half:explain") == "none");
  CHECK(labels("/v1/models/") == "none");
  CHECK(labels("/monitoring/prometheus/metrics") == "none");
}
