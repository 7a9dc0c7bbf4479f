// The REST API's :predict (see rest_predict.h): the inputs from the fast reading or the DOM, the
// graph run, the answer written. Followed: TF Serving's api_rest.md for the formats and
// util/json_tensor.cc for what the row and columnar formats accept.
#include "export/rest_predict.h"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "export/json_examples.h"
#include "export/rest_api.h"
#include "export/rest_json.h"
#include "export/rest_json_text.h"
#include "export/rest_json_writer.h"
#include "export/rest_numbers.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

constexpr const char* kDefaultSignature = "serving_default";

// A request's inputs (by ONNX name), its signature, and its format.
struct PredictInputs {
  std::string signature_name;
  const SignatureDef* signature = nullptr;
  bool rows = false;
  NamedTensors tensors;
};

// The inputs of a body of plain numbers for a signature of one float input, or nullopt: the
// DOM path reads the body (and names what is wrong with it).
std::optional<PredictInputs> numeric_inputs(const Servable& servable, const std::string& body) {
  std::optional<NumericRequest> request = read_numeric_request(body);
  if (!request) return std::nullopt;
  PredictInputs inputs{
      request->signature_name.value_or(kDefaultSignature), nullptr, request->rows, {}};
  auto found = servable.signatures.find(inputs.signature_name);
  if (found == servable.signatures.end() || found->second.inputs.size() != 1) return std::nullopt;
  inputs.signature = &found->second;
  const TensorInfo& info = inputs.signature->inputs.begin()->second;
  if (info.dtype != DType::kF32 && info.dtype != DType::kF64) return std::nullopt;
  const Shape& shape = request->shape;
  if (shape.size() != info.shape.size()) return std::nullopt;
  for (size_t axis = 0; axis < shape.size(); ++axis)
    if (info.shape[axis] >= 0 && info.shape[axis] != shape[axis]) return std::nullopt;
  Tensor tensor = Tensor::empty(shape, info.dtype, Device::cpu());
  const std::vector<double>& values = request->values;
  if (info.dtype == DType::kF64) {
    std::memcpy(tensor.data<double>(), values.data(), values.size() * sizeof(double));
  } else {
    float* out = tensor.data<float>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  }
  inputs.tensors[info.name] = std::move(tensor);
  return inputs;
}

// The inputs of any other body, read through the DOM (the API's errors).
PredictInputs dom_inputs(const Servable& servable, const json& request) {
  PredictInputs result;
  const SignatureDef& signature = find_signature(servable, request, result.signature_name);
  result.signature = &signature;
  const bool rows = request.contains("instances");
  result.rows = rows;
  if (rows == request.contains("inputs"))
    throw InvalidArgumentError(rows ? "Not both 'instances' and 'inputs' may be given"
                                    : "Missing 'instances' or 'inputs' key");

  NamedTensors& inputs = result.tensors;  // by ONNX name
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
  return result;
}

void append_key(std::string& out, const std::string& key) {
  out += json(key).dump();
  out += ':';
}

// The graph run on the inputs, and its answer in the request's format.
std::string answer(const Servable& servable, PredictInputs request, Batcher* batcher) {
  const SignatureDef& signature = *request.signature;
  NamedTensors& inputs = request.tensors;
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
  const NamedTensors outputs = run_graph(servable, request.signature_name, inputs, batcher);
  const bool single_output = signature.outputs.size() == 1;
  std::vector<std::pair<std::string, TensorWriter>> writers;  // in the order of the keys
  for (const auto& [key, info] : signature.outputs)
    writers.emplace_back(key, TensorWriter(output_of(outputs, info)));
  std::string out;
  if (!request.rows) {
    out += "{\"outputs\":";
    if (single_output) {
      writers.front().second.write(out);
    } else {
      out += '{';
      for (size_t i = 0; i < writers.size(); ++i) {
        if (i > 0) out += ',';
        append_key(out, writers[i].first);
        writers[i].second.write(out);
      }
      out += '}';
    }
    return out += '}';
  }
  for (const auto& [key, writer] : writers)
    if (writer.rows() != batch)
      throw InvalidArgumentError(fmt::format(
          "output '{}' has {} rows for a batch of {}: the row format (\"instances\") needs one "
          "row per instance; ask with \"inputs\" instead",
          key, writer.rows(), batch));
  out += "{\"predictions\":[";
  for (int64_t row = 0; row < batch; ++row) {
    if (row > 0) out += ',';
    if (single_output) {
      writers.front().second.write_row(out, row);
      continue;
    }
    out += '{';
    for (size_t i = 0; i < writers.size(); ++i) {
      if (i > 0) out += ',';
      append_key(out, writers[i].first);
      writers[i].second.write_row(out, row);
    }
    out += '}';
  }
  return out += "]}";
}

}  // namespace

json parse_body(const std::string& body) {
  json request = parse_request_json(body);
  if (!request.is_object()) throw InvalidArgumentError("the request body must be a JSON object");
  return request;
}

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
    throw InvalidArgumentError(fmt::format(
        "Serving signature name: \"{}\" not found in signature def", printable(signature_name)));
  return found->second;
}

std::string predict_text(const Servable& servable, const std::string& body, Batcher* batcher) {
  if (std::optional<PredictInputs> inputs = numeric_inputs(servable, body))
    return answer(servable, std::move(*inputs), batcher);
  return answer(servable, dom_inputs(servable, parse_body(body)), batcher);
}

}  // namespace est::serving
