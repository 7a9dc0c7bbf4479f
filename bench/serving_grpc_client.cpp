// TF Serving's Predict over gRPC for serving_bench (see serving_grpc_client.h). Followed: TF
// Serving's apis/predict.proto and tensorflow's tensor.proto (tensor_content: the values'
// bytes, little-endian, row-major).
#include "bench/serving_grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>

#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace est::bench {

struct GrpcPredictClient::State {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<tensorflow::serving::PredictionService::Stub> stub;
  tensorflow::serving::PredictRequest request;
  std::mutex error_mutex;  // the threads share `error`
};

GrpcPredictClient::GrpcPredictClient(int port, const std::string& model,
                                     const std::string& input_name, const Tensor& input)
    : state_(std::make_unique<State>()) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  state_->channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                              grpc::InsecureChannelCredentials(), arguments);
  state_->stub = tensorflow::serving::PredictionService::NewStub(state_->channel);
  state_->request.mutable_model_spec()->set_name(model);
  tensorflow::TensorProto& tensor = (*state_->request.mutable_inputs())[input_name];
  tensor.set_dtype(tensorflow::DT_FLOAT);
  for (int64_t dim : input.shape()) tensor.mutable_tensor_shape()->add_dim()->set_size(dim);
  const Tensor host = input.to(Device::cpu());
  tensor.set_tensor_content(std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
}

GrpcPredictClient::~GrpcPredictClient() = default;

bool GrpcPredictClient::predict(std::string* error) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  tensorflow::serving::PredictResponse response;
  const grpc::Status status = state_->stub->Predict(&context, state_->request, &response);
  if (status.ok() && response.outputs_size() > 0) return true;
  std::lock_guard lock(state_->error_mutex);
  if (error != nullptr && error->empty())
    *error = status.ok()
                 ? "an answer without outputs"
                 : "status " + std::to_string(status.error_code()) + ": " + status.error_message();
  return false;
}

}  // namespace est::bench
