// serving_bench's onnxruntime peer (bench/serving_ort_http.js behind Node's HTTP server) run
// as the bench runs it: it must answer the same predictions as est-serve over the same REST
// API (the bench checks the first answers of both and prints ort_http_matches_est_serve=yes),
// and its requests must all succeed, so that its requests/s compare like with like.
#include <doctest/doctest.h>

#include <string>

#include "tests/command.h"
#include "tests/skip.h"

using namespace est::testing;

namespace {

std::string built(const std::string& relative) {
  return std::string(EST_BUILD_ROOT) + "/" + relative;
}

}  // namespace

TEST_CASE("serving_bench: the onnxruntime peer over HTTP answers as est-serve and is timed") {
  auto found = run_program(
      "sh " + shell_quote(std::string(EST_SOURCE_ROOT) + "/tests/export/find_onnxruntime.sh") +
          " " + shell_quote(built("npm")),
      400);
  if (found.exit_code != 0) return skip("onnxruntime-node: " + found.output);
  std::string modules = found.output.substr(0, found.output.find_last_not_of('\n') + 1);
  modules = modules.substr(modules.find_last_of('\n') + 1);
  ScratchDir dir;
  const std::string command =
      "env EST_DEVICE=/cpu:0 " + shell_quote(built("bench/serving_bench")) + " --est_serve " +
      shell_quote(built("tools/est-serve")) + " --requests 16 --clients 1 2 --api rest" +
      " --ort_http " + shell_quote(std::string(EST_SOURCE_ROOT) + "/bench/serving_ort_http.js") +
      " --node_path " + shell_quote(modules) + " --dir " + shell_quote(dir.str());
  auto ran = run_program(command, 300);
  INFO(ran.output);
  REQUIRE(ran.exit_code == 0);
  CHECK(contains(ran.output, "ort_http_matches_est_serve=yes"));
  CHECK(contains(ran.output, "ort_http_rest clients=1 p50_ms="));
  CHECK(contains(ran.output, "ort_http_rest clients=2 p50_ms="));
  CHECK(contains(ran.output, "ort_http_rest clients=2 client_cpu_us_per_request="));
  CHECK_FALSE(contains(ran.output, "failed_requests"));
  CHECK_FALSE(contains(ran.output, "first_error"));
  CHECK(contains(ran.output, "target rest_1_over_ort_http_1="));
}
