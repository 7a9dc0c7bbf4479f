// Classify and Regress on tf.Example inputs (see services.h), through the REST API's code
// paths (rest_classify.h's checks and answers, rest_api.h's parse_examples and run_graph).
// Followed: TF Serving's servables/tensorflow/util.cc (InputToSerializedExampleTensor: an empty
// input is refused, a context is merged into every example) and classifier.cc / regressor.cc.
#include <fmt/format.h>

#include "data/element.h"
#include "export/grpc/services.h"
#include "export/rest_api.h"
#include "export/rest_classify.h"

namespace est::serving {
namespace {

// The examples of `input`, serialized (each merged over the context, its own features winning).
Tensor serialized_examples(const tensorflow::serving::Input& input) {
  std::vector<std::string> serialized;
  if (input.has_example_list()) {
    for (const auto& example : input.example_list().examples())
      serialized.push_back(example.SerializeAsString());
  } else if (input.has_example_list_with_context()) {
    const auto& list = input.example_list_with_context();
    for (const auto& example : list.examples()) {
      tensorflow::Example merged = list.context();
      merged.MergeFrom(example);
      serialized.push_back(merged.SerializeAsString());
    }
  }
  if (serialized.empty()) throw InvalidArgumentError("Input is empty.");
  return data::string_tensor(serialized);
}

// The REST answer's "results" of `verb` for `input`.
nlohmann::json run(const Servable& servable, const std::string& signature_name,
                   const std::string& verb, const tensorflow::serving::Input& input,
                   Batcher* batcher) {
  auto found = servable.signatures.find(signature_name);
  if (found == servable.signatures.end())
    throw FailedPreconditionError(
        fmt::format("Serving signature key \"{}\" not found.", signature_name));
  const SignatureDef& signature = found->second;
  check_answers(signature, signature_name, verb);
  const Tensor examples = serialized_examples(input);
  const int64_t batch = examples.dim(0);
  const NamedTensors outputs = run_graph(
      servable, signature_name, parse_examples(*signature.parse_example, examples), batcher);
  return (verb == "classify" ? classify_results(signature, outputs, batch)
                             : regress_results(signature, signature_name, outputs, batch))
      .at("results");
}

float number(const nlohmann::json& value) {
  if (value.is_number()) return value.get<float>();
  return std::numeric_limits<float>::quiet_NaN();  // NaN, written as a string in JSON
}

}  // namespace

void classify(const Servable& servable, const std::string& signature_name,
              const tensorflow::serving::Input& input, Batcher* batcher,
              tensorflow::serving::ClassificationResult& result) {
  for (const auto& row : run(servable, signature_name, "classify", input, batcher)) {
    auto* classifications = result.add_classifications();
    for (const auto& pair : row) {
      auto* entry = classifications->add_classes();
      entry->set_label(pair.at(0).get<std::string>());
      entry->set_score(number(pair.at(1)));
    }
  }
}

void regress(const Servable& servable, const std::string& signature_name,
             const tensorflow::serving::Input& input, Batcher* batcher,
             tensorflow::serving::RegressionResult& result) {
  for (const auto& value : run(servable, signature_name, "regress", input, batcher))
    result.add_regressions()->set_value(number(value));
}

}  // namespace est::serving
