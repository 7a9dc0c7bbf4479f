// TF Serving's PredictionService (see grpc_server.h). Followed: TF Serving's
// servables/tensorflow/predict_util.cc (signature look-up, the inputs checked against the
// signature, output_filter, the answer's model spec, outputs as typed TensorProto fields),
// get_model_metadata_impl.cc (metadata_field "signature_def", a SignatureDefMap in an Any) and
// multi_inference.cc (one model, distinct signatures, classify or regress tasks).
#include <set>

#include <fmt/format.h>

#include "export/grpc/service_util.h"
#include "export/grpc/services.h"
#include "export/grpc/tensor_proto.h"
#include "export/rest_api.h"
#include "export/rest_json.h"
#include "export/rest_json_text.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace est::serving {
namespace {

namespace tfs = tensorflow::serving;

template <class Map>
std::string keys_of(const Map& map) {
  std::set<std::string> keys;
  for (const auto& [key, value] : map) keys.insert(key);
  return fmt::format("{}", fmt::join(keys, ","));
}

template <class Map>
std::set<std::string> key_set(const Map& map) {
  std::set<std::string> keys;
  for (const auto& [key, value] : map) keys.insert(key);
  return keys;
}

std::string difference(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& key : a)
    if (!b.count(key)) out.push_back(printable(key));
  return fmt::format("{}", fmt::join(out, ","));
}

const SignatureDef& find_signature(const Servable& servable, const std::string& name) {
  auto found = servable.signatures.find(name);
  if (found == servable.signatures.end())
    throw FailedPreconditionError(
        fmt::format("Serving signature key \"{}\" not found.", printable(name)));
  return found->second;
}

}  // namespace

void predict(const Servable& servable, const tfs::PredictRequest& request, Batcher* batcher,
             tfs::PredictResponse& response) {
  const std::string signature_name = signature_name_of(request.model_spec());
  const SignatureDef& signature = find_signature(servable, signature_name);
  set_model_spec(*response.mutable_model_spec(), request.model_spec().name(), servable.version,
                 signature_name);
  if (key_set(request.inputs()) != key_set(signature.inputs))
    throw InvalidArgumentError(fmt::format(
        "input size does not match signature: {}!={} len({{{}}}) != len({{{}}}). Sent extra: "
        "{{{}}}. Missing but required: {{{}}}.",
        request.inputs().size(), signature.inputs.size(), difference(key_set(request.inputs()), {}),
        keys_of(signature.inputs), difference(key_set(request.inputs()), key_set(signature.inputs)),
        difference(key_set(signature.inputs), key_set(request.inputs()))));
  std::vector<std::string> aliases;
  std::set<std::string> seen;
  for (const std::string& alias : request.output_filter()) {
    if (!signature.outputs.count(alias))
      throw InvalidArgumentError(fmt::format(
          "output tensor alias not found in signature: {} Outputs expected to be in the set "
          "{{{}}}.",
          printable(alias), keys_of(signature.outputs)));
    if (!seen.insert(alias).second)
      throw InvalidArgumentError("duplicate output tensor alias: " + printable(alias));
    aliases.push_back(alias);
  }
  if (aliases.empty())
    for (const auto& [alias, info] : signature.outputs) aliases.push_back(alias);

  NamedTensors inputs;  // by the graph's names
  for (const auto& [key, info] : signature.inputs)
    inputs[info.name] = tensor_from_proto(request.inputs().at(key), printable(key));
  if (signature.parse_example)
    inputs = parse_examples(*signature.parse_example,
                            inputs.at(signature.inputs.at(signature.parse_example->input).name));
  const NamedTensors outputs = run_graph(servable, signature_name, inputs, batcher);
  for (const std::string& alias : aliases)
    tensor_to_proto(output_of(outputs, signature.outputs.at(alias)),
                    (*response.mutable_outputs())[alias]);
}

namespace {

void tensor_info_proto(const TensorInfo& info, tensorflow::TensorInfo& out) {
  out.set_name(info.name);
  out.set_dtype(tf_data_type(info.dtype));
  for (int64_t dim : info.shape) out.mutable_tensor_shape()->add_dim()->set_size(dim);
}

void metadata(const ServerCore& core, const tfs::GetModelMetadataRequest& request,
              tfs::GetModelMetadataResponse& response) {
  require_model_spec(request.has_model_spec());
  if (request.metadata_field_size() == 0)
    throw InvalidArgumentError("GetModelMetadataRequest must specify at least one metadata_field");
  for (const std::string& field : request.metadata_field())
    if (field != "signature_def")
      throw InvalidArgumentError(
          fmt::format("Metadata field {} is not supported", printable(field)));
  const auto servable = find_servable(core, request.model_spec());
  tfs::SignatureDefMap map;
  for (const auto& [key, signature] : servable->signatures) {
    tensorflow::SignatureDef& out = (*map.mutable_signature_def())[key];
    out.set_method_name(signature.method_name);
    for (const auto& [k, info] : signature.inputs)
      tensor_info_proto(info, (*out.mutable_inputs())[k]);
    for (const auto& [k, info] : signature.outputs)
      tensor_info_proto(info, (*out.mutable_outputs())[k]);
  }
  response.mutable_model_spec()->set_name(request.model_spec().name());
  response.mutable_model_spec()->mutable_version()->set_value(servable->version);
  (*response.mutable_metadata())["signature_def"].PackFrom(map);
}

}  // namespace

void multi_inference(const Servable& servable, const tfs::MultiInferenceRequest& request,
                     Batcher* batcher, tfs::MultiInferenceResponse& response) {
  if (request.tasks_size() == 0)
    throw InvalidArgumentError("MultiInferenceRequest must specify at least one task");
  const std::string& model = request.tasks(0).model_spec().name();
  std::set<std::string> signatures;
  for (const auto& task : request.tasks()) {
    if (task.model_spec().name() != model)
      throw InvalidArgumentError(
          "All ModelSpecs in a MultiInferenceRequest must access the same model name.");
    const std::string name = signature_name_of(task.model_spec());
    if (!signatures.insert(name).second)
      throw InvalidArgumentError("Duplicate evaluation of signature: " + printable(name));
    if (task.method_name() != "tensorflow/serving/classify" &&
        task.method_name() != "tensorflow/serving/regress")
      throw InvalidArgumentError("Unsupported signature method_name: " +
                                 printable(task.method_name()));
  }
  for (const auto& task : request.tasks()) {
    const std::string name = signature_name_of(task.model_spec());
    auto* result = response.add_results();
    set_model_spec(*result->mutable_model_spec(), model, servable.version, name);
    if (task.method_name() == "tensorflow/serving/classify")
      classify(servable, name, request.input(), batcher, *result->mutable_classification_result());
    else
      regress(servable, name, request.input(), batcher, *result->mutable_regression_result());
  }
}

namespace {

class PredictionService final : public tfs::PredictionService::Service {
 public:
  PredictionService(ServerCore& core, Batcher* batcher) : core_(core), batcher_(batcher) {}

  grpc::Status Predict(grpc::ServerContext*, const tfs::PredictRequest* request,
                       tfs::PredictResponse* response) override {
    return metered(request->model_spec().name(), "Predict", [&] {
      require_model_spec(request->has_model_spec());
      predict(*find_servable(core_, request->model_spec()), *request, batcher_, *response);
    });
  }
  grpc::Status GetModelMetadata(grpc::ServerContext*, const tfs::GetModelMetadataRequest* request,
                                tfs::GetModelMetadataResponse* response) override {
    return guarded([&] { metadata(core_, *request, *response); });
  }
  grpc::Status Classify(grpc::ServerContext*, const tfs::ClassificationRequest* request,
                        tfs::ClassificationResponse* response) override {
    return on_examples(*request, *response, "Classify", classify);
  }
  grpc::Status Regress(grpc::ServerContext*, const tfs::RegressionRequest* request,
                       tfs::RegressionResponse* response) override {
    return on_examples(*request, *response, "Regress", regress);
  }
  grpc::Status MultiInference(grpc::ServerContext*, const tfs::MultiInferenceRequest* request,
                              tfs::MultiInferenceResponse* response) override {
    return guarded([&] {
      if (request->tasks_size() == 0)
        throw InvalidArgumentError("MultiInferenceRequest must specify at least one task");
      multi_inference(*find_servable(core_, request->tasks(0).model_spec()), *request, batcher_,
                      *response);
    });
  }

 private:
  // Classify or Regress (`run`, named `api`) on the examples of `request`.
  template <class Request, class Response, class Run>
  grpc::Status on_examples(const Request& request, Response& response, const char* api, Run&& run) {
    return metered(request.model_spec().name(), api, [&] {
      require_model_spec(request.has_model_spec());
      const auto servable = find_servable(core_, request.model_spec());
      const std::string name = signature_name_of(request.model_spec());
      set_model_spec(*response.mutable_model_spec(), request.model_spec().name(), servable->version,
                     name);
      run(*servable, name, request.input(), batcher_, *response.mutable_result());
    });
  }

  ServerCore& core_;
  Batcher* batcher_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_prediction_service(ServerCore& core, Batcher* batcher) {
  return std::make_unique<PredictionService>(core, batcher);
}

}  // namespace est::serving
