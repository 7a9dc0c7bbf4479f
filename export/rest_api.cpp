// The REST API's routing, its status and metadata answers, and its errors (see rest_api.h);
// predict is rest_predict.h's, classify and regress answers rest_classify.h's. Followed: TF
// Serving's api_rest.md for the request and response formats.
#include "export/rest_api.h"

#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "data/element.h"
#include "export/json_examples.h"
#include "export/rest_classify.h"
#include "export/rest_json_text.h"
#include "export/rest_predict.h"
#include "export/serving_metrics.h"
#include "ops/array_ops.h"

namespace est::serving {

// Serialized tf.Examples parsed with the signature's pre-processing step into the graph's
// inputs (a bad example is the client's error: 400).
NamedTensors parse_examples(const ParseExampleStep& step, const Tensor& serialized) {
  try {
    return data::parse_example(serialized.to_vector<std::string>(), step.features);
  } catch (const Error& error) {
    throw InvalidArgumentError(fmt::format("could not parse the tf.Examples: {}", error.what()));
  }
}

namespace {

// The graph's inputs for a signature's features: what its lookups make of them, the features
// only the lookups read left out (they stay out of a batch).
NamedTensors graph_inputs(const Servable& servable, const SignatureDef& signature,
                          const NamedTensors& features) {
  if (signature.lookups.empty()) return features;
  const NamedTensors all = run_lookups(signature.lookups, features, servable.model.inputs());
  NamedTensors inputs;
  for (const TensorInfo& info : servable.model.inputs())
    if (all.count(info.name)) inputs[info.name] = all.at(info.name);
  return inputs;
}

// Requests batch together when they run one model version and signature on rows alike.
std::string batch_key(const Servable& servable, const std::string& signature_name,
                      const Batcher& batcher, const NamedTensors& inputs) {
  return fmt::format("{}/{}{}", servable.version, signature_name, batcher.rows_key(inputs));
}

}  // namespace

// The graph's outputs for its inputs (after the signature's lookups), through the batcher when
// there is one.
NamedTensors run_graph(const Servable& servable, const std::string& signature_name,
                       const NamedTensors& features, Batcher* batcher) {
  const SignatureDef& signature = servable.signatures.at(signature_name);
  const NamedTensors inputs = graph_inputs(servable, signature, features);
  const int64_t start = now_micros();
  if (batcher == nullptr) {
    NamedTensors outputs = servable.model.run(inputs);
    record_runtime(servable.model_name, signature.method_name, micros_since(start));
    return outputs;
  }
  NamedTensors outputs =
      batcher->run(batch_key(servable, signature_name, *batcher, inputs), inputs,
                   [&servable](const NamedTensors& batch) { return servable.model.run(batch); });
  record_runtime(servable.model_name, signature.method_name, micros_since(start));
  return outputs;
}

void run_graph_async(std::shared_ptr<const Servable> servable, const std::string& signature_name,
                     const NamedTensors& features, Batcher& batcher, Batcher::DoneFn done) {
  const SignatureDef& signature = servable->signatures.at(signature_name);
  NamedTensors inputs;
  try {
    inputs = graph_inputs(*servable, signature, features);
  } catch (...) {
    done({}, std::current_exception());
    return;
  }
  const int64_t start = now_micros();
  std::string key = batch_key(*servable, signature_name, batcher, inputs);
  auto run = [servable](const NamedTensors& batch) { return servable->model.run(batch); };
  batcher.run_async(std::move(key), std::move(inputs), std::move(run),
                    [servable, method = signature.method_name, start, done = std::move(done)](
                        NamedTensors outputs, std::exception_ptr error) {
                      if (!error) record_runtime(servable->model_name, method, micros_since(start));
                      done(std::move(outputs), error);
                    });
}

namespace {

using json = nlohmann::json;

// A path outside /v1/, which TF Serving's HTTP server does not hand to its REST API (404).
struct NotRouted {};

// The parts of a request path (TF Serving's http_rest_api_util.cc: kPredictionApiGegex for
// POST, kModelStatusApiRegex for GET).
struct Route {
  std::string model;
  std::optional<int64_t> version;
  std::optional<std::string> label;
  std::string verb;         // POST: what follows the ':'
  std::string subresource;  // GET: "metadata" or empty
};

json error_body(const std::string& message) { return {{"error", message}}; }

// The servable a route names.
std::shared_ptr<const Servable> find_servable(const ModelLookup& models, const Route& route) {
  return serving::find_servable(models(route.model).get(), route.model, route.version, route.label);
}

json tensor_info_json(const TensorInfo& info) {
  json dims = json::array();
  for (int64_t dim : info.shape) dims.push_back({{"size", std::to_string(dim)}, {"name", ""}});
  return {{"dtype", tf_dtype_name(info.dtype)},
          {"tensor_shape", {{"dim", dims}, {"unknown_rank", false}}},
          {"name", info.name}};
}

// The status of the version the route names, or of every version served or failed (TF
// Serving's get_model_status_impl.cc; a failed load is END with its error).
json status_json(const ModelLookup& models, const Route& route) {
  json statuses = json::array();
  for (const VersionStatus& status :
       version_statuses(models(route.model).get(), route.model, route.version, route.label))
    statuses.push_back(
        {{"version", std::to_string(status.version)},
         {"state", status.error ? "END" : "AVAILABLE"},
         {"status",
          {{"error_code", status.error ? std::string(status_code_name(*status.error)) : "OK"},
           {"error_message", status.error_message}}}});
  return {{"model_version_status", statuses}};
}

json metadata_json(const std::string& name, const Servable& servable) {
  json signature_def = json::object();
  for (const auto& [key, signature] : servable.signatures) {
    json inputs = json::object(), outputs = json::object();
    for (const auto& [k, info] : signature.inputs) inputs[k] = tensor_info_json(info);
    for (const auto& [k, info] : signature.outputs) outputs[k] = tensor_info_json(info);
    signature_def[key] = {
        {"inputs", inputs}, {"outputs", outputs}, {"method_name", signature.method_name}};
  }
  return {{"model_spec",
           {{"name", name}, {"signature_name", ""}, {"version", std::to_string(servable.version)}}},
          {"metadata", {{"signature_def", {{"signature_def", signature_def}}}}}};
}

// TF Serving's classify and regress: examples in, the answers of rest_classify.h out.
json classify_or_regress(const Servable& servable, const std::string& verb, const json& request,
                         Batcher* batcher) {
  std::string signature_name;
  const SignatureDef& signature = find_signature(servable, request, signature_name);
  check_answers(signature, signature_name, verb);
  const std::vector<std::string> examples = examples_from_json(request);
  const int64_t batch = static_cast<int64_t>(examples.size());
  const NamedTensors outputs =
      run_graph(servable, signature_name,
                parse_examples(*signature.parse_example, data::string_tensor(examples)), batcher);
  return verb == "classify" ? classify_results(signature, outputs, batch)
                            : regress_results(signature, signature_name, outputs, batch);
}

// Whether `text` starts at `at` with `word`, ignoring case (TF's regexes are (?i)); moves `at`
// past it when it does.
bool consume(const std::string& text, size_t& at, std::string_view word) {
  if (text.size() - at < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[at + i])) != word[i]) return false;
  at += word.size();
  return true;
}

// A run of characters other than '/' and ':' (at least one) at `at`, or nullopt.
std::optional<std::string> name_at(const std::string& text, size_t& at) {
  const size_t end = std::min(text.find_first_of("/:", at), text.size());
  if (end == at) return std::nullopt;
  std::string name = text.substr(at, end - at);
  at = end;
  return name;
}

// The route of `path` (nullopt when malformed), as TF Serving's regexes match it:
//   POST /v1/models/NAME[/versions/DIGITS | /labels/LABEL]:VERB
//   GET  /v1/models[/NAME][/versions/DIGITS | /labels/LABEL][/metadata]
// Written out rather than with std::regex, whose matcher recurses per character.
std::optional<Route> parse_route(const std::string& method, const std::string& path) {
  Route route;
  size_t at = 0;
  if (!consume(path, at, "/v1/models")) return std::nullopt;
  const bool post = method == "POST";
  if (!post && method != "GET") return std::nullopt;
  if (size_t slash = at; consume(path, slash, "/")) {
    at = slash;
    auto model = name_at(path, at);
    if (!model) return std::nullopt;
    route.model = *model;
  } else if (post) {
    return std::nullopt;
  }
  if (size_t versions = at; consume(path, versions, "/versions/")) {
    const size_t end = std::min(path.find_first_not_of("0123456789", versions), path.size());
    if (end > versions) {
      const std::string digits = path.substr(versions, end - versions);
      int64_t version = 0;
      auto [last, error] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
      if (error != std::errc())
        throw InvalidArgumentError(
            fmt::format("Failed to convert version: {} to numeric.", digits));
      route.version = version;
      at = end;
    }
  } else if (size_t labels = at; consume(path, labels, "/labels/")) {
    if (auto label = name_at(path, labels)) {
      route.label = *label;
      at = labels;
    }
  }
  if (post) {
    if (!consume(path, at, ":")) return std::nullopt;
    route.verb = path.substr(at);
    at = path.size();
  } else if (size_t metadata = at; consume(path, metadata, "/metadata")) {
    route.subresource = path.substr(at + 1, metadata - at - 1);
    at = metadata;
  }
  if (at != path.size()) return std::nullopt;
  return route;
}

std::string route(const ModelLookup& models, const std::string& method, const std::string& path,
                  const std::string& body, Batcher* batcher) {
  if (size_t at = 0; !consume(path, at, "/v1/")) throw NotRouted{};
  const std::optional<Route> route = parse_route(method, path);
  const std::string malformed = fmt::format("Malformed request: {} {}", method, printable(path));
  if (!route) throw InvalidArgumentError(malformed);
  if (method == "GET") {
    if (route->model.empty()) throw InvalidArgumentError("Missing model name in request.");
    if (route->subresource != "metadata") return answer_text(status_json(models, *route));
    return answer_text(metadata_json(route->model, *find_servable(models, *route)));
  }
  if (route->verb == "predict") return predict_text(*find_servable(models, *route), body, batcher);
  if (route->verb == "classify" || route->verb == "regress")
    return answer_text(classify_or_regress(*find_servable(models, *route), route->verb,
                                           parse_body(body), batcher));
  throw InvalidArgumentError(malformed);
}

}  // namespace

int http_status_of(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kCancelled:
      return 499;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

RestResponse handle_rest(const ModelManager& model, const std::string& method,
                         const std::string& path, const std::string& body, Batcher* batcher) {
  return handle_rest(
      [&model](const std::string& name) {
        return name == model.name() ? std::shared_ptr<const ModelManager>(
                                          std::shared_ptr<const ModelManager>(), &model)
                                    : nullptr;
      },
      method, path, body, batcher);
}

RestResponse handle_rest(const ServerCore& core, const std::string& method, const std::string& path,
                         const std::string& body, Batcher* batcher) {
  return handle_rest([&core](const std::string& name) { return core.model(name); }, method, path,
                     body, batcher);
}

RestResponse handle_rest(const ModelLookup& models, const std::string& method,
                         const std::string& path, const std::string& body, Batcher* batcher) {
  try {
    return {200, route(models, method, path, body, batcher)};
  } catch (const NotRouted&) {
    return {404,
            error_body(fmt::format("Not found: {} {}; TF Serving's REST API is under /v1/", method,
                                   printable(path)))
                .dump(),
            StatusCode::kNotFound};
  } catch (const Error& error) {
    return {http_status_of(error.code()), error_body(error.what()).dump(), error.code()};
  } catch (const std::exception& error) {
    return {500, error_body(std::string("internal error: ") + error.what()).dump(),
            StatusCode::kInternal};
  }
}

}  // namespace est::serving
