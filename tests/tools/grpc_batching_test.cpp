// est-serve's gRPC Predict with batching, in-process (GrpcServer over a ServerCore and a
// Batcher, asked by the C++ stubs on 127.0.0.1): Predict runs on gRPC's callback API, whose
// few threads must not wait for a batch to fill, so concurrent requests join one batch and the
// batcher's completion answers each; the batcher's refusals and the checks before it keep TF
// Serving's status codes.
#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <vector>

#include "export/grpc/grpc_server.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
namespace tfs = tensorflow::serving;

tfs::PredictRequest predict_request(const std::string& model, const std::vector<float>& x,
                                    const std::string& signature = "") {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  if (!signature.empty()) request.mutable_model_spec()->set_signature_name(signature);
  tensorflow::TensorProto& tensor = (*request.mutable_inputs())["x"];
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(x.size()));
  for (float value : x) tensor.add_float_val(value);
  return request;
}

struct Answer {
  grpc::Status status;
  tfs::PredictResponse response;
};

Answer call(tfs::PredictionService::Stub& stub, const tfs::PredictRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  Answer answer;
  answer.status = stub.Predict(&context, request, &answer.response);
  return answer;
}

}  // namespace

TEST_CASE("est-serve gRPC with batching: concurrent Predicts join one batch, each its answer") {
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "base");
  serving::ServerCore core;
  core.reconfigure({{.name = "half_plus_two", .base_path = dir / "base"}});
  core.poll();
  // A batch of 20 rows, or 10 s: gRPC's callback threads (2 to 16, by the cores) each waiting
  // in the batcher would run batches of a few requests, one every 10 s.
  constexpr int kRequests = 20;
  serving::Batcher batcher(
      {.max_batch_size = kRequests, .batch_timeout = std::chrono::seconds(10)});
  serving::GrpcServer server(core, &batcher, {.address = "127.0.0.1", .port = 0});
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = tfs::PredictionService::NewStub(channel);

  std::vector<std::future<Answer>> answers;
  for (int i = 0; i < kRequests; ++i)
    answers.push_back(std::async(std::launch::async, [&stub, i] {
      return call(*stub, predict_request("half_plus_two", {static_cast<float>(i)}));
    }));
  for (int i = 0; i < kRequests; ++i) {
    const Answer answer = answers[static_cast<size_t>(i)].get();
    INFO(answer.status.error_message());
    REQUIRE(answer.status.ok());
    const tensorflow::TensorProto& y = answer.response.outputs().at("y");
    REQUIRE(y.float_val_size() == 1);
    CHECK(y.float_val(0) == doctest::Approx(0.5 * i + 2));
    CHECK(answer.response.model_spec().name() == "half_plus_two");
    CHECK(answer.response.model_spec().signature_name() == "serving_default");
  }
  CHECK(batcher.batches_run() == 1);

  // The batcher's refusal, as from TF Serving: more rows than a batch.
  std::vector<float> rows(kRequests + 1, 1.0f);
  Answer refused = call(*stub, predict_request("half_plus_two", rows));
  CHECK(refused.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(refused.status.error_message() ==
        "Task size 21 is larger than maximum input batch size 20");
  // The checks before the batcher.
  CHECK(call(*stub, predict_request("nope", {1})).status.error_code() ==
        grpc::StatusCode::NOT_FOUND);
  CHECK(call(*stub, predict_request("half_plus_two", {1}, "nope")).status.error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(call(*stub, tfs::PredictRequest()).status.error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
  // A request of a full batch runs alone and is answered too.
  Answer full = call(*stub, predict_request("half_plus_two", std::vector<float>(kRequests, 2.0f)));
  REQUIRE(full.status.ok());
  CHECK(full.response.outputs().at("y").float_val_size() == kRequests);
  server.shutdown(1000);
}
