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

PredictCall prepare_predict(const Servable& servable, const tfs::PredictRequest& request,
                            tfs::PredictResponse& response) {
  PredictCall call;
  call.signature_name = signature_name_of(request.model_spec());
  const SignatureDef& signature = find_signature(servable, call.signature_name);
  call.signature = &signature;
  set_model_spec(*response.mutable_model_spec(), request.model_spec().name(), servable.version,
                 call.signature_name);
  if (key_set(request.inputs()) != key_set(signature.inputs))
    throw InvalidArgumentError(fmt::format(
        "input size does not match signature: {}!={} len({{{}}}) != len({{{}}}). Sent extra: "
        "{{{}}}. Missing but required: {{{}}}.",
        request.inputs().size(), signature.inputs.size(), difference(key_set(request.inputs()), {}),
        keys_of(signature.inputs), difference(key_set(request.inputs()), key_set(signature.inputs)),
        difference(key_set(signature.inputs), key_set(request.inputs()))));
  std::set<std::string> seen;
  for (const std::string& alias : request.output_filter()) {
    if (!signature.outputs.count(alias))
      throw InvalidArgumentError(fmt::format(
          "output tensor alias not found in signature: {} Outputs expected to be in the set "
          "{{{}}}.",
          printable(alias), keys_of(signature.outputs)));
    if (!seen.insert(alias).second)
      throw InvalidArgumentError("duplicate output tensor alias: " + printable(alias));
    call.aliases.push_back(alias);
  }
  if (call.aliases.empty())
    for (const auto& [alias, info] : signature.outputs) call.aliases.push_back(alias);

  for (const auto& [key, info] : signature.inputs)  // by the graph's names
    call.inputs[info.name] = tensor_from_proto(request.inputs().at(key), printable(key));
  if (signature.parse_example)
    call.inputs =
        parse_examples(*signature.parse_example,
                       call.inputs.at(signature.inputs.at(signature.parse_example->input).name));
  return call;
}

void answer_predict(const PredictCall& call, const NamedTensors& outputs,
                    tfs::PredictResponse& response) {
  for (const std::string& alias : call.aliases)
    tensor_to_proto(output_of(outputs, call.signature->outputs.at(alias)),
                    (*response.mutable_outputs())[alias]);
}

void predict(const Servable& servable, const tfs::PredictRequest& request, Batcher* batcher,
             tfs::PredictResponse& response) {
  const PredictCall call = prepare_predict(servable, request, response);
  answer_predict(call, run_graph(servable, call.signature_name, call.inputs, batcher), response);
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

// Every method on gRPC's synchronous API (est-serve with --grpc_max_threads, whose thread quota
// bounds these threads as in TF Serving), and the base of CallbackService.
class SyncService : public tfs::PredictionService::Service {
 public:
  SyncService() = default;  // CallbackService's base: it sets the members
  SyncService(ServerCore& core, Batcher* batcher) : core_(&core), batcher_(batcher) {}

  grpc::Status Predict(grpc::ServerContext*, const tfs::PredictRequest* request,
                       tfs::PredictResponse* response) override {
    return metered(request->model_spec().name(), "Predict", [&] {
      require_model_spec(request->has_model_spec());
      predict(*find_servable(*core_, request->model_spec()), *request, batcher_, *response);
    });
  }
  grpc::Status GetModelMetadata(grpc::ServerContext*, const tfs::GetModelMetadataRequest* request,
                                tfs::GetModelMetadataResponse* response) override {
    return guarded([&] { metadata(*core_, *request, *response); });
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
      multi_inference(*find_servable(*core_, request->tasks(0).model_spec()), *request, batcher_,
                      *response);
    });
  }

 protected:
  // Classify or Regress (`run`, named `api`) on the examples of `request`.
  template <class Request, class Response, class Run>
  grpc::Status on_examples(const Request& request, Response& response, const char* api, Run&& run) {
    return metered(request.model_spec().name(), api, [&] {
      require_model_spec(request.has_model_spec());
      const auto servable = find_servable(*core_, request.model_spec());
      const std::string name = signature_name_of(request.model_spec());
      set_model_spec(*response.mutable_model_spec(), request.model_spec().name(), servable->version,
                     name);
      run(*servable, name, request.input(), batcher_, *response.mutable_result());
    });
  }

  ServerCore* core_ = nullptr;
  Batcher* batcher_ = nullptr;
};

// Predict on gRPC's callback API, the other methods as SyncService: answered on the thread that
// read the request, or, batched, by the batcher's completion, so that none of gRPC's few
// callback threads waits for a batch. Predict takes the message's bytes (a raw method) so that
// one that does not parse gets gRPC's INTERNAL as from the synchronous API (gRPC 1.51's callback
// API answers UNIMPLEMENTED).
class CallbackService final
    : public tfs::PredictionService::WithRawCallbackMethod_Predict<SyncService> {
 public:
  CallbackService(ServerCore& core, Batcher* batcher) {
    core_ = &core;
    batcher_ = batcher;
  }

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request_bytes,
                                    grpc::ByteBuffer* response_bytes) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (batcher_ == nullptr) {
      tfs::PredictRequest request;
      tfs::PredictResponse response;
      grpc::Status status = parse(*request_bytes, request);
      if (status.ok())
        status = metered(request.model_spec().name(), "Predict", [&] {
          require_model_spec(request.has_model_spec());
          predict(*find_servable(*core_, request.model_spec()), request, nullptr, response);
        });
      finish(reactor, status, response, response_bytes);
      return reactor;
    }
    // Batched: the batcher's completion answers, on the thread that ran the batch.
    auto state = std::make_shared<Batched>();
    grpc::Status status = parse(*request_bytes, state->request);
    if (!status.ok()) {
      reactor->Finish(status);
      return reactor;
    }
    const int64_t start = now_micros();
    auto done = [reactor, response_bytes, state, start](const grpc::Status& status) {
      record_grpc_request(state->request.model_spec().name(), "Predict", status, start);
      finish(reactor, status, state->response, response_bytes);
    };
    std::shared_ptr<const Servable> servable;
    status = guarded([&] {
      require_model_spec(state->request.has_model_spec());
      servable = find_servable(*core_, state->request.model_spec());
      state->call = prepare_predict(*servable, state->request, state->response);
    });
    if (!status.ok()) {
      done(status);
      return reactor;
    }
    run_graph_async(servable, state->call.signature_name, state->call.inputs, *batcher_,
                    [state, done](NamedTensors outputs, std::exception_ptr error) {
                      done(guarded([&] {
                        if (error) std::rethrow_exception(error);
                        answer_predict(state->call, outputs, state->response);
                      }));
                    });
    return reactor;
  }

 private:
  struct Batched {
    tfs::PredictRequest request;
    tfs::PredictResponse response;
    PredictCall call;
  };

  static grpc::Status parse(const grpc::ByteBuffer& bytes, tfs::PredictRequest& request) {
    grpc::ByteBuffer copy(bytes);  // Deserialize consumes its buffer
    return grpc::SerializationTraits<tfs::PredictRequest>::Deserialize(&copy, &request);
  }
  static void finish(grpc::ServerUnaryReactor* reactor, grpc::Status status,
                     const tfs::PredictResponse& response, grpc::ByteBuffer* response_bytes) {
    if (status.ok()) {
      bool own_buffer = false;
      status = grpc::SerializationTraits<tfs::PredictResponse>::Serialize(response, response_bytes,
                                                                          &own_buffer);
    }
    reactor->Finish(status);
  }
};

}  // namespace

std::unique_ptr<grpc::Service> make_prediction_service(ServerCore& core, Batcher* batcher,
                                                       bool callback) {
  if (callback) return std::make_unique<CallbackService>(core, batcher);
  return std::make_unique<SyncService>(core, batcher);
}

}  // namespace est::serving
