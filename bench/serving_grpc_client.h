// serving_bench's gRPC client: TF Serving's PredictionService/Predict through the C++ stubs
// generated from est-serve's .proto files (export/grpc/proto), with the request a TF Serving
// Python client sends (tf.make_tensor_proto: the image's bytes in tensor_content), built once.
// Each client has its channel and its own connection (gRPC would otherwise share one
// connection between channels to one address), as separate client processes would.
#pragma once

#include <memory>
#include <string>

#include "ops/tensor.h"

namespace est::bench {

class GrpcPredictClient {
 public:
  // `input` (float32) is sent as the input named `input_name` of the model `model`.
  GrpcPredictClient(int port, const std::string& model, const std::string& input_name,
                    const Tensor& input);
  ~GrpcPredictClient();
  // One Predict (from any thread); true when it is answered OK with at least one output.
  // `error` gets the first failure's status.
  bool predict(std::string* error);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace est::bench
