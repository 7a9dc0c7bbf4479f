// :classify and :regress answers (see rest_classify.h). Followed: TF Serving's api_rest.md for
// the requests and answers, its json_tensor.cc for the "results" key.
#include "export/rest_classify.h"

#include <optional>

#include <fmt/format.h>

#include "export/rest_json.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

// Output `key` of `signature` as [batch, k] values on the host (a [batch] output: k = 1), or
// nullopt when the signature has no such output.
std::optional<Tensor> host_output(const SignatureDef& signature, const NamedTensors& outputs,
                                  const std::string& key, int64_t batch, int64_t& k) {
  auto info = signature.outputs.find(key);
  if (info == signature.outputs.end()) return std::nullopt;
  Tensor tensor = output_of(outputs, info->second).to(Device::cpu());
  if (tensor.rank() == 0 || tensor.rank() > 2 || tensor.dim(0) != batch)
    throw InvalidArgumentError(fmt::format(
        "Expected output '{}' of shape [batch_size, num_classes] with batch_size {}, got {}", key,
        batch, ops::shape_str(tensor.shape())));
  k = tensor.rank() == 2 ? tensor.dim(1) : 1;
  return tensor;
}

}  // namespace

void check_answers(const SignatureDef& signature, const std::string& signature_name,
                   const std::string& verb) {
  const bool classify = verb == "classify";
  if (signature.method_name != "tensorflow/serving/" + verb)
    throw InvalidArgumentError(
        fmt::format("Expected {} signature method_name to be tensorflow/serving/{}. Was: {}",
                    classify ? "classification" : "regression", verb, signature.method_name));
  if (!signature.parse_example)
    throw InvalidArgumentError(
        fmt::format("signature '{}' takes no serialized tf.Examples: it cannot answer {}",
                    signature_name, verb));
}

json regress_results(const SignatureDef& signature, const std::string& signature_name,
                     const NamedTensors& outputs, int64_t batch) {
  int64_t k = 0;
  std::optional<Tensor> values = host_output(signature, outputs, "outputs", batch, k);
  if (!values || k != 1)
    throw InvalidArgumentError(
        fmt::format("the regression signature '{}' must have one value per example in 'outputs'",
                    signature_name));
  json results = json::array();
  for (double v : values->to_vector<float>()) results.push_back(json_of(Tensor::scalar(v)));
  return {{"results", results}};
}

json classify_results(const SignatureDef& signature, const NamedTensors& outputs, int64_t batch) {
  int64_t classes_k = 0, scores_k = 0;
  std::optional<Tensor> classes = host_output(signature, outputs, "classes", batch, classes_k);
  std::optional<Tensor> scores = host_output(signature, outputs, "scores", batch, scores_k);
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
  json results = json::array();
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

}  // namespace est::serving
