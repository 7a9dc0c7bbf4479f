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

std::unique_ptr<grpc::Service> make_prediction_service(ServerCore& core, Batcher* batcher);
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
void predict(const Servable& servable, const tensorflow::serving::PredictRequest& request,
             Batcher* batcher, tensorflow::serving::PredictResponse& response);
void multi_inference(const Servable& servable,
                     const tensorflow::serving::MultiInferenceRequest& request, Batcher* batcher,
                     tensorflow::serving::MultiInferenceResponse& response);

}  // namespace est::serving
