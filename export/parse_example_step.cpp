// signatures.json's "parse_example" step to and from JSON (see parse_example_step.h).
#include "export/parse_example_step.h"

#include <fmt/format.h>

#include "export/servable.h"
#include "ops/error.h"

namespace est::serving {

nlohmann::json to_json(const ParseExampleStep& step) {
  nlohmann::json features = nlohmann::json::object();
  for (const auto& [name, spec] : step.features) {
    const auto* fixed = std::get_if<data::FixedLenFeature>(&spec);
    if (fixed == nullptr)
      throw UnimplementedError(fmt::format(
          "export: the parsing receiver's feature '{}' is a VarLenFeature (a sparse or ragged "
          "tensor), which an exported graph cannot take as an input; use a FixedLenFeature "
          "with a default_value",
          name));
    if (fixed->dtype != DType::kF32 && fixed->dtype != DType::kI64 &&
        fixed->dtype != DType::kString)
      throw UnimplementedError(
          fmt::format("export: the parsing receiver's feature '{}' is {}; exported parsing "
                      "takes float32, int64 and string features",
                      name, dtype_name(fixed->dtype)));
    nlohmann::json feature = {{"dtype", tf_dtype_name(fixed->dtype)}, {"shape", fixed->shape}};
    if (fixed->default_value) feature["default_value"] = *fixed->default_value;
    if (fixed->default_int64) feature["default_value"] = *fixed->default_int64;
    if (fixed->default_strings) feature["default_value"] = *fixed->default_strings;
    features[name] = feature;
  }
  return {{"input", step.input}, {"features", features}};
}

ParseExampleStep parse_example_step_from_json(const nlohmann::json& json) {
  ParseExampleStep step;
  try {
    step.input = json.at("input").get<std::string>();
    for (const auto& [name, value] : json.at("features").items()) {
      data::FixedLenFeature feature;
      feature.dtype = dtype_from_tf_name(value.at("dtype").get<std::string>());
      feature.shape = value.at("shape").get<Shape>();
      if (value.contains("default_value")) {
        const auto& defaults = value["default_value"];
        if (feature.dtype == DType::kString)
          feature.default_strings = defaults.get<std::vector<std::string>>();
        else if (feature.dtype == DType::kI64)
          feature.default_int64 = defaults.get<std::vector<int64_t>>();
        else
          feature.default_value = defaults.get<std::vector<double>>();
      }
      step.features[name] = feature;
    }
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("'parse_example' is malformed: {}", error.what()));
  } catch (const InvalidArgumentError& error) {
    throw DataLossError(fmt::format("'parse_example': {}", error.what()));
  }
  return step;
}

}  // namespace est::serving
