// The two gRPC services of grpc_server.h, each in its own file: PredictionService
// (prediction_service.cpp, classify_service.cpp for its tf.Example methods) and ModelService
// (model_service.cpp).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>

#include <memory>
#include <string>

#include "export/batcher.h"
#include "export/server_core.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/inference.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"

namespace est::serving {

// PredictionService: with `callback`, Predict on gRPC's callback API (answered on the thread that
// read the request; a batched Predict by the batcher's completion, so that no callback thread
// waits for a batch) and the other methods on its synchronous API; else all synchronous.
std::unique_ptr<grpc::Service> make_prediction_service(ServerCore& core, Batcher* batcher,
                                                       bool callback);
std::unique_ptr<grpc::Service> make_model_service(ServerCore& core);

// Classify and Regress on one servable (classify_service.cpp; the REST API's code paths): the
// examples of `input` run through signature `signature_name`; InvalidArgumentError for an empty
// input, a signature of another method or one that takes no tf.Examples.
void classify(const Servable& servable, const std::string& signature_name,
              const tensorflow::serving::Input& input, Batcher* batcher,
              tensorflow::serving::ClassificationResult& result);
void regress(const Servable& servable, const std::string& signature_name,
             const tensorflow::serving::Input& input, Batcher* batcher,
             tensorflow::serving::RegressionResult& result);
// Predict and MultiInference on one servable (prediction_service.cpp), the request's model name
// and version already resolved to it (TF Serving's errors for a bad signature or input).
// predict() is prepare_predict() (the checks, the answer's model spec, the graph's inputs),
// run_graph(), then answer_predict() (the outputs asked for, into the response), which the
// callback service runs apart when a batcher completes the request.
struct PredictCall {
  std::string signature_name;
  const SignatureDef* signature = nullptr;  // the servable's
  std::vector<std::string> aliases;         // the outputs to answer
  NamedTensors inputs;                      // by the graph's names
};
PredictCall prepare_predict(const Servable& servable,
                            const tensorflow::serving::PredictRequest& request,
                            tensorflow::serving::PredictResponse& response);
void answer_predict(const PredictCall& call, const NamedTensors& outputs,
                    tensorflow::serving::PredictResponse& response);
void predict(const Servable& servable, const tensorflow::serving::PredictRequest& request,
             Batcher* batcher, tensorflow::serving::PredictResponse& response);
void multi_inference(const Servable& servable,
                     const tensorflow::serving::MultiInferenceRequest& request, Batcher* batcher,
                     tensorflow::serving::MultiInferenceResponse& response);

}  // namespace est::serving
