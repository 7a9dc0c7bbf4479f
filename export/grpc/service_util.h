// What the gRPC services (prediction_service.cpp, model_service.cpp) share: an est Error as a
// gRPC status of the same code (est's StatusCode numbers are gRPC's), the model spec of a
// request resolved to a served version, the model spec of an answer, and the request metrics.
#pragma once

#include <grpcpp/grpcpp.h>

#include <exception>
#include <memory>

#include "export/server_core.h"
#include "export/serving_metrics.h"
#include "ops/error.h"
#include "tensorflow_serving/apis/model.pb.h"

namespace est::serving {

// fn() as a gRPC status: OK, or the status of the Error it threw (INTERNAL for another
// exception).
template <class Fn>
grpc::Status guarded(Fn&& fn) {
  try {
    fn();
    return grpc::Status::OK;
  } catch (const Error& error) {
    return grpc::Status(static_cast<grpc::StatusCode>(error.code()), error.what());
  } catch (const std::exception& error) {
    return grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  }
}

// A gRPC request of `api` ("Predict", "Classify", "Regress") on `model_name`, begun at `start`
// (now_micros()) and answered `status`, counted in TF Serving's request metrics
// (serving_metrics.h).
inline void record_grpc_request(const std::string& model_name, const std::string& api,
                                const grpc::Status& status, int64_t start) {
  record_request(
      model_name,
      status.ok() ? "OK" : status_code_name(static_cast<StatusCode>(status.error_code())), api,
      "GRPC", micros_since(start));
}

// guarded(fn), counted as above.
template <class Fn>
grpc::Status metered(const std::string& model_name, const std::string& api, Fn&& fn) {
  const int64_t start = now_micros();
  grpc::Status status = guarded(std::forward<Fn>(fn));
  record_grpc_request(model_name, api, status, start);
  return status;
}

// InvalidArgumentError "Missing ModelSpec" unless the request has one (TF Serving's check).
inline void require_model_spec(bool has_model_spec) {
  if (!has_model_spec) throw InvalidArgumentError("Missing ModelSpec");
}

// The served version `spec` names (its version or version_label, else the newest).
inline std::shared_ptr<const Servable> find_servable(const ServerCore& core,
                                                     const tensorflow::serving::ModelSpec& spec) {
  using Spec = tensorflow::serving::ModelSpec;
  std::optional<int64_t> version;
  std::optional<std::string> label;
  if (spec.version_choice_case() == Spec::kVersion) version = spec.version().value();
  if (spec.version_choice_case() == Spec::kVersionLabel) label = spec.version_label();
  return core.find(spec.name(), version, label);
}

// The signature `spec` names, serving_default when it names none.
inline std::string signature_name_of(const tensorflow::serving::ModelSpec& spec) {
  return spec.signature_name().empty() ? "serving_default" : spec.signature_name();
}

// An answer's model spec: the model, the version that answered, the signature.
inline void set_model_spec(tensorflow::serving::ModelSpec& out, const std::string& name,
                           int64_t version, const std::string& signature_name) {
  out.set_name(name);
  out.mutable_version()->set_value(version);
  if (!signature_name.empty()) out.set_signature_name(signature_name);
}

}  // namespace est::serving
