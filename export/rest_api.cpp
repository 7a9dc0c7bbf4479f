// The REST API's routing, JSON <-> tensor conversion and responses (see rest_api.h). Followed:
// TF Serving's api_rest.md and json_tensor.h for the request and response formats.
#include "export/rest_api.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "data/element.h"
#include "export/json_examples.h"
#include "ops/array_ops.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

constexpr const char* kDefaultSignature = "serving_default";

// A path the API does not have (404, TF's wording).
struct Malformed {};

json error_body(const std::string& message) { return {{"error", message}}; }

// ---- JSON -> tensor -------------------------------------------------------------------------

Shape shape_of(const json& value) {
  if (!value.is_array()) return {};
  Shape shape{static_cast<int64_t>(value.size())};
  if (!value.empty()) {
    Shape inner = shape_of(value[0]);
    shape.insert(shape.end(), inner.begin(), inner.end());
  }
  return shape;
}

// The scalars of one tensor, by the kind of its dtype.
struct Scalars {
  std::vector<double> doubles;
  std::vector<int64_t> integers;
  std::vector<std::string> strings;
};

// Appends the scalars of `value`, which must have shape[depth:], to `scalars`.
void collect(const json& value, const Shape& shape, size_t depth, const TensorInfo& info,
             const std::string& input, Scalars& scalars) {
  if (depth < shape.size()) {
    if (!value.is_array() || static_cast<int64_t>(value.size()) != shape[depth])
      throw InvalidArgumentError(fmt::format(
          "input '{}': the lists are ragged (expected {} values at depth {}); a tensor's rows "
          "must all have one shape",
          input, shape[depth], depth));
    for (const json& element : value) collect(element, shape, depth + 1, info, input, scalars);
    return;
  }
  if (info.dtype == DType::kString) {
    if (is_base64_object(value)) {
      scalars.strings.push_back(base64_decode(value["b64"].get<std::string>()));
    } else if (value.is_string()) {
      scalars.strings.push_back(value.get<std::string>());
    } else {
      throw InvalidArgumentError(
          fmt::format("input '{}' is DT_STRING: expected a string or {{\"b64\": ...}}, got {}",
                      input, value.dump()));
    }
  } else if (info.dtype == DType::kBool) {
    if (!value.is_boolean())
      throw InvalidArgumentError(fmt::format(
          "input '{}' is DT_BOOL: expected true or false, got {}", input, value.dump()));
    scalars.integers.push_back(value.get<bool>());
  } else if (is_floating(info.dtype)) {
    if (!value.is_number())
      throw InvalidArgumentError(fmt::format("input '{}' is {}: expected a number, got {}", input,
                                             tf_dtype_name(info.dtype), value.dump()));
    scalars.doubles.push_back(value.get<double>());
  } else {
    if (!value.is_number_integer())
      throw InvalidArgumentError(fmt::format("input '{}' is {}: expected an integer, got {}", input,
                                             tf_dtype_name(info.dtype), value.dump()));
    scalars.integers.push_back(value.get<int64_t>());
  }
}

Tensor make_tensor(const TensorInfo& info, const Shape& shape, const Scalars& scalars) {
  if (info.dtype == DType::kString) return data::string_tensor(scalars.strings, shape);
  if (is_floating(info.dtype))
    return ops::cast(Tensor::from_vector(scalars.doubles, shape), info.dtype);
  return ops::cast(Tensor::from_vector(scalars.integers, shape), info.dtype);
}

void check_shape(const std::string& input, const TensorInfo& info, const Shape& shape) {
  bool fits = shape.size() == info.shape.size();
  for (size_t axis = 0; fits && axis < shape.size(); ++axis)
    fits = info.shape[axis] < 0 || info.shape[axis] == shape[axis];
  if (!fits)
    throw InvalidArgumentError(
        fmt::format("input '{}' must have shape {} (-1: any size; the first is the batch), got {}",
                    input, ops::shape_str(info.shape), ops::shape_str(shape)));
}

// Columnar: the whole tensor of one input.
Tensor tensor_from_json(const std::string& input, const TensorInfo& info, const json& value) {
  const Shape shape = shape_of(value);
  Scalars scalars;
  collect(value, shape, 0, info, input, scalars);
  check_shape(input, info, shape);
  return make_tensor(info, shape, scalars);
}

// Row format: one value per instance, stacked.
Tensor tensor_from_rows(const std::string& input, const TensorInfo& info,
                        const std::vector<const json*>& rows) {
  const Shape row_shape = shape_of(*rows.front());
  Scalars scalars;
  for (const json* row : rows) collect(*row, row_shape, 0, info, input, scalars);
  Shape shape{static_cast<int64_t>(rows.size())};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  check_shape(input, info, shape);
  return make_tensor(info, shape, scalars);
}

// ---- tensor -> JSON -------------------------------------------------------------------------

json json_of(const Tensor& tensor, int64_t begin, size_t depth, int64_t stride_elements,
             const std::vector<double>& doubles, const std::vector<int64_t>& integers,
             const std::vector<std::string>& strings) {
  const Shape& shape = tensor.shape();
  if (depth == shape.size()) {
    if (tensor.dtype() == DType::kString) return strings[begin];
    if (tensor.dtype() == DType::kBool) return integers[begin] != 0;
    if (is_floating(tensor.dtype())) return doubles[begin];
    return integers[begin];
  }
  const int64_t inner = stride_elements / std::max<int64_t>(shape[depth], 1);
  json list = json::array();
  for (int64_t i = 0; i < shape[depth]; ++i)
    list.push_back(
        json_of(tensor, begin + i * inner, depth + 1, inner, doubles, integers, strings));
  return list;
}

json json_of(const Tensor& tensor, int64_t row = -1) {
  Tensor host = tensor.to(Device::cpu());
  std::vector<double> doubles;
  std::vector<int64_t> integers;
  std::vector<std::string> strings;
  if (host.dtype() == DType::kString) {
    strings = host.to_vector<std::string>();
  } else if (is_floating(host.dtype())) {
    // float32 values print as the float they are, not as the double they widen to
    for (float v : host.to_vector<float>()) doubles.push_back(std::stod(fmt::format("{}", v)));
    if (host.dtype() == DType::kF64) doubles = host.to_vector<double>();
  } else {
    integers = host.to_vector<int64_t>();
  }
  if (row < 0) return json_of(host, 0, 0, host.numel(), doubles, integers, strings);
  const int64_t row_elements = host.numel() / std::max<int64_t>(host.dim(0), 1);
  return json_of(host, row * row_elements, 1, row_elements, doubles, integers, strings);
}

// ---- requests -------------------------------------------------------------------------------

std::shared_ptr<const Servable> find_servable(const ModelManager& models, const std::string& name,
                                              std::optional<int64_t> version) {
  auto servable = models.current();
  if (name != models.name() || !servable || (version && *version != servable->version))
    throw NotFoundError(fmt::format("Servable not found for request: {}({}{})",
                                    version ? "Specific" : "Latest", name,
                                    version ? fmt::format(", {}", *version) : ""));
  return servable;
}

json tensor_info_json(const TensorInfo& info) {
  json dims = json::array();
  for (int64_t dim : info.shape) dims.push_back({{"size", std::to_string(dim)}, {"name", ""}});
  return {{"dtype", tf_dtype_name(info.dtype)},
          {"tensor_shape", {{"dim", dims}, {"unknown_rank", false}}},
          {"name", info.name}};
}

json status_json(const Servable& servable) {
  return {{"model_version_status",
           json::array({{{"version", std::to_string(servable.version)},
                         {"state", "AVAILABLE"},
                         {"status", {{"error_code", "OK"}, {"error_message", ""}}}}})}};
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

json parse_body(const std::string& body) {
  json request;
  try {
    request = json::parse(body);
  } catch (const json::parse_error& error) {
    throw InvalidArgumentError(fmt::format("JSON Parse error: {}", error.what()));
  }
  if (!request.is_object()) throw InvalidArgumentError("the request body must be a JSON object");
  return request;
}

// The signature a request names ("signature_name"), or serving_default.
const SignatureDef& find_signature(const Servable& servable, const json& request,
                                   std::string& signature_name) {
  signature_name = kDefaultSignature;
  if (request.contains("signature_name")) {
    if (!request["signature_name"].is_string())
      throw InvalidArgumentError("'signature_name' must be a string");
    signature_name = request["signature_name"].get<std::string>();
  }
  auto found = servable.signatures.find(signature_name);
  if (found == servable.signatures.end())
    throw InvalidArgumentError(
        fmt::format("Serving signature name: \"{}\" not found in signature def", signature_name));
  return found->second;
}

// Serialized tf.Examples parsed with the signature's pre-processing step into the graph's
// inputs (a bad example is the client's error: 400).
NamedTensors parse_examples(const ParseExampleStep& step, const Tensor& serialized) {
  try {
    return data::parse_example(serialized.to_vector<std::string>(), step.features);
  } catch (const Error& error) {
    throw InvalidArgumentError(fmt::format("could not parse the tf.Examples: {}", error.what()));
  }
}

// The graph's outputs for its inputs (after the signature's lookups), through the batcher when
// there is one.
NamedTensors run_graph(const Servable& servable, const std::string& signature_name,
                       const NamedTensors& features, Batcher* batcher) {
  const SignatureDef& signature = servable.signatures.at(signature_name);
  NamedTensors inputs = features;
  if (!signature.lookups.empty()) {
    // The features only the lookups read are not graph inputs: they stay out of the batch.
    const NamedTensors all = run_lookups(signature.lookups, features, servable.model.inputs());
    inputs.clear();
    for (const TensorInfo& info : servable.model.inputs())
      if (all.count(info.name)) inputs[info.name] = all.at(info.name);
  }
  if (batcher == nullptr) return servable.model.run(inputs);
  // Requests batch together when they run one model version and signature on rows alike.
  std::string key = fmt::format("{}/{}", servable.version, signature_name);
  for (const auto& [name, tensor] : inputs) {
    Shape row(tensor.shape().begin() + (tensor.rank() > 0 ? 1 : 0), tensor.shape().end());
    key += fmt::format("/{}:{}{}", name, dtype_name(tensor.dtype()), ops::shape_str(row));
  }
  return batcher->run(key, inputs,
                      [&servable](const NamedTensors& batch) { return servable.model.run(batch); });
}

const Tensor& output_of(const NamedTensors& outputs, const TensorInfo& info) {
  auto it = outputs.find(info.name);
  if (it == outputs.end())
    throw InternalError("the model has no output '" + info.name + "' its signature names");
  return it->second;
}

json predict(const Servable& servable, const json& request, Batcher* batcher) {
  std::string signature_name;
  const SignatureDef& signature = find_signature(servable, request, signature_name);
  const bool rows = request.contains("instances");
  if (rows == request.contains("inputs"))
    throw InvalidArgumentError(rows ? "Not both 'instances' and 'inputs' may be given"
                                    : "Missing 'instances' or 'inputs' key");

  NamedTensors inputs;  // by ONNX name
  const bool single_input = signature.inputs.size() == 1;
  if (rows) {
    const json& instances = request["instances"];
    if (!instances.is_array() || instances.empty())
      throw InvalidArgumentError("'instances' must be a non-empty list");
    for (const auto& [key, info] : signature.inputs) {
      std::vector<const json*> values;
      for (const json& instance : instances) {
        const bool named = instance.is_object() && !is_base64_object(instance);
        if (!named && !single_input)
          throw InvalidArgumentError(fmt::format(
              "the signature has {} inputs: each instance must be an object naming them",
              signature.inputs.size()));
        if (named && !instance.contains(key))
          throw InvalidArgumentError(fmt::format("an instance lacks input '{}'", key));
        values.push_back(named ? &instance[key] : &instance);
      }
      inputs[info.name] = tensor_from_rows(key, info, values);
    }
  } else {
    const json& columns = request["inputs"];
    for (const auto& [key, info] : signature.inputs) {
      const bool named = columns.is_object() && !is_base64_object(columns);
      if (!named && !single_input)
        throw InvalidArgumentError(
            fmt::format("the signature has {} inputs: 'inputs' must be an object naming them",
                        signature.inputs.size()));
      if (named && !columns.contains(key))
        throw InvalidArgumentError(fmt::format("'inputs' lacks input '{}'", key));
      inputs[info.name] = tensor_from_json(key, info, named ? columns[key] : columns);
    }
  }
  int64_t batch = -1;
  for (const auto& [name, tensor] : inputs) {
    if (tensor.rank() == 0) continue;
    if (batch >= 0 && tensor.dim(0) != batch)
      throw InvalidArgumentError("the inputs have different batch sizes");
    batch = tensor.dim(0);
  }
  if (signature.parse_example) {
    const TensorInfo& examples = signature.inputs.at(signature.parse_example->input);
    inputs = parse_examples(*signature.parse_example, inputs.at(examples.name));
  }
  const NamedTensors outputs = run_graph(servable, signature_name, inputs, batcher);
  const bool single_output = signature.outputs.size() == 1;
  if (!rows) {
    if (single_output)
      return {{"outputs", json_of(output_of(outputs, signature.outputs.begin()->second))}};
    json columns = json::object();
    for (const auto& [key, info] : signature.outputs)
      columns[key] = json_of(output_of(outputs, info));
    return {{"outputs", columns}};
  }
  json predictions = json::array();
  for (int64_t row = 0; row < batch; ++row) {
    if (single_output) {
      predictions.push_back(json_of(output_of(outputs, signature.outputs.begin()->second), row));
      continue;
    }
    json named = json::object();
    for (const auto& [key, info] : signature.outputs)
      named[key] = json_of(output_of(outputs, info), row);
    predictions.push_back(named);
  }
  return {{"predictions", predictions}};
}

// TF Serving's classify and regress (api_rest.md; its json_tensor.cc names the answer's key
// "results"): examples in, per example [[label, score], ...] or one value out.
json classify_or_regress(const Servable& servable, const std::string& verb, const json& request,
                         Batcher* batcher) {
  std::string signature_name;
  const SignatureDef& signature = find_signature(servable, request, signature_name);
  const bool classify = verb == "classify";
  if (signature.method_name != "tensorflow/serving/" + verb)
    throw InvalidArgumentError(
        fmt::format("Expected {} signature method_name to be tensorflow/serving/{}. Was: {}",
                    classify ? "classification" : "regression", verb, signature.method_name));
  if (!signature.parse_example)
    throw InvalidArgumentError(
        fmt::format("signature '{}' takes no serialized tf.Examples: it cannot answer {}",
                    signature_name, verb));
  const std::vector<std::string> examples = examples_from_json(request);
  const int64_t batch = static_cast<int64_t>(examples.size());
  const NamedTensors outputs =
      run_graph(servable, signature_name,
                parse_examples(*signature.parse_example, data::string_tensor(examples)), batcher);
  // Each output as [batch, k] values on the host (a [batch] output: k = 1).
  auto host = [&](const std::string& key, int64_t& k) -> std::optional<Tensor> {
    auto info = signature.outputs.find(key);
    if (info == signature.outputs.end()) return std::nullopt;
    Tensor tensor = output_of(outputs, info->second).to(Device::cpu());
    if (tensor.rank() == 0 || tensor.rank() > 2 || tensor.dim(0) != batch)
      throw InvalidArgumentError(fmt::format(
          "Expected output '{}' of shape [batch_size, num_classes] with batch_size {}, got {}", key,
          batch, ops::shape_str(tensor.shape())));
    k = tensor.rank() == 2 ? tensor.dim(1) : 1;
    return tensor;
  };
  json results = json::array();
  if (!classify) {
    int64_t k = 0;
    std::optional<Tensor> values = host("outputs", k);
    if (!values || k != 1)
      throw InvalidArgumentError(
          fmt::format("the regression signature '{}' must have one value per example in 'outputs'",
                      signature_name));
    for (double v : values->to_vector<float>()) results.push_back(json_of(Tensor::scalar(v)));
    return {{"results", results}};
  }
  int64_t classes_k = 0, scores_k = 0;
  std::optional<Tensor> classes = host("classes", classes_k);
  std::optional<Tensor> scores = host("scores", scores_k);
  if (classes && scores && classes_k != scores_k)
    throw InvalidArgumentError(fmt::format(
        "classes and scores have {} and {} columns; they must be equal", classes_k, scores_k));
  const int64_t k = classes ? classes_k : scores_k;
  std::vector<std::string> labels;
  if (classes) {
    if (classes->dtype() == DType::kString) {
      labels = classes->to_vector<std::string>();
    } else {
      for (int64_t id : classes->to_vector<int64_t>()) labels.push_back(std::to_string(id));
    }
  }
  std::vector<float> score_values;
  if (scores) score_values = scores->to_vector<float>();
  for (int64_t row = 0; row < batch; ++row) {
    json pairs = json::array();
    for (int64_t j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(row * k + j);
      pairs.push_back({classes ? labels[at] : std::string(),
                       scores ? json_of(Tensor::scalar(score_values[at])) : json(0.0)});
    }
    results.push_back(pairs);
  }
  return {{"results", results}};
}

json route(const ModelManager& models, const std::string& method, const std::string& path,
           const std::string& body, Batcher* batcher) {
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) != 0) throw Malformed{};
  std::string rest = path.substr(prefix.size());
  std::string verb;
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    verb = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  bool metadata = false;
  if (rest.size() > 9 && rest.compare(rest.size() - 9, 9, "/metadata") == 0) {
    metadata = true;
    rest = rest.substr(0, rest.size() - 9);
  }
  std::optional<int64_t> version;
  if (auto versions = rest.find("/versions/"); versions != std::string::npos) {
    const std::string number = rest.substr(versions + 10);
    if (number.empty() || number.size() > 18 ||
        number.find_first_not_of("0123456789") != std::string::npos)
      throw Malformed{};
    version = std::stoll(number);
    rest = rest.substr(0, versions);
  }
  if (rest.empty() || rest.find('/') != std::string::npos) throw Malformed{};
  if (method == "GET" && verb.empty()) {
    auto servable = find_servable(models, rest, version);
    return metadata ? metadata_json(rest, *servable) : status_json(*servable);
  }
  if (method == "POST" && !metadata && verb == "predict")
    return predict(*find_servable(models, rest, version), parse_body(body), batcher);
  if (method == "POST" && !metadata && (verb == "classify" || verb == "regress"))
    return classify_or_regress(*find_servable(models, rest, version), verb, parse_body(body),
                               batcher);
  throw Malformed{};
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

RestResponse handle_rest(const ModelManager& models, const std::string& method,
                         const std::string& path, const std::string& body, Batcher* batcher) {
  try {
    return {200, route(models, method, path, body, batcher).dump()};
  } catch (const Malformed&) {
    return {404, error_body(fmt::format("Malformed request: {} {}", method, path)).dump()};
  } catch (const Error& error) {
    return {http_status_of(error.code()), error_body(error.what()).dump()};
  } catch (const std::exception& error) {
    return {500, error_body(std::string("internal error: ") + error.what()).dump()};
  }
}

}  // namespace est::serving
