// base64 and JSON examples -> serialized tf.Examples (see json_examples.h). Followed:
// tensorflow_serving/util/json_tensor.cc (MakeExampleFromJsonObject, AddValueToFeature).
#include "export/json_examples.h"

#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "data/example.h"
#include "ops/error.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

enum class Kind { kNone, kBytes, kInt64, kFloat };

struct FeatureValues {
  Kind kind = Kind::kNone;
  std::vector<std::string> bytes;
  std::vector<int64_t> int64s;
  std::vector<float> floats;
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return "bytes";
    case Kind::kInt64:
      return "int64";
    case Kind::kFloat:
      return "float";
    case Kind::kNone:
      break;
  }
  return "UNKNOWN";
}

void add_value(const json& value, const std::string& feature, FeatureValues& values) {
  Kind kind = Kind::kNone;
  if (value.is_boolean() || value.is_number_integer()) {
    kind = Kind::kInt64;
  } else if (value.is_number_float()) {
    kind = Kind::kFloat;
  } else if (value.is_string() || is_base64_object(value)) {
    kind = Kind::kBytes;
  } else {
    throw InvalidArgumentError(fmt::format("Feature: {} has element with unexpected JSON type: {}",
                                           feature, value.type_name()));
  }
  if (values.kind != Kind::kNone && values.kind != kind)
    throw InvalidArgumentError(
        fmt::format("Unexpected element type in feature: {} expecting type: {}", feature,
                    kind_name(values.kind)));
  values.kind = kind;
  switch (kind) {
    case Kind::kInt64:
      if (value.is_boolean()) {
        values.int64s.push_back(value.get<bool>() ? 1 : 0);
      } else {
        if (value.is_number_unsigned() &&
            value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw InvalidArgumentError(
              fmt::format("Feature: {} has uint64 element. Only int64 is supported.", feature));
        values.int64s.push_back(value.get<int64_t>());
      }
      break;
    case Kind::kFloat: {
      const double number = value.get<double>();
      if (std::isfinite(number) && std::abs(number) > std::numeric_limits<float>::max())
        throw InvalidArgumentError(fmt::format(
            "Cannot convert JSON value: {} to float without loss of precision.", value.dump()));
      values.floats.push_back(static_cast<float>(number));
      break;
    }
    case Kind::kBytes:
      values.bytes.push_back(value.is_string() ? value.get<std::string>()
                                               : base64_decode(value["b64"].get<std::string>()));
      break;
    case Kind::kNone:
      break;
  }
}

void add_features(const json& object, std::map<std::string, FeatureValues>& features) {
  if (!object.is_object())
    throw InvalidArgumentError(
        fmt::format("Example must be JSON object but got JSON {}", object.type_name()));
  for (const auto& [name, content] : object.items()) {
    FeatureValues values;
    if (content.is_array()) {
      for (const json& value : content) add_value(value, name, values);
    } else {
      add_value(content, name, values);
    }
    features[name] = std::move(values);
  }
}

}  // namespace

bool is_base64_object(const json& value) {
  return value.is_object() && value.size() == 1 && value.contains("b64") &&
         value["b64"].is_string();
}

std::string base64_decode(std::string_view text) {
  static const std::array<int, 256> kValues = [] {
    std::array<int, 256> values{};
    values.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) values[static_cast<unsigned char>(alphabet[i])] = i;
    return values;
  }();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) throw InvalidArgumentError("Unable to base64 decode");
  std::string bytes;
  bytes.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int value = kValues[static_cast<unsigned char>(c)];
    if (value < 0) throw InvalidArgumentError("Unable to base64 decode");
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return bytes;
}

std::vector<std::string> examples_from_json(const json& request) {
  std::map<std::string, FeatureValues> context;
  if (request.contains("context")) add_features(request["context"], context);
  if (!request.contains("examples"))
    throw InvalidArgumentError(
        "When method is classify or regress, key 'examples' is expected and was not found");
  const json& examples = request["examples"];
  if (!examples.is_array()) throw InvalidArgumentError("Expecting 'examples' value to be a list");
  if (examples.empty()) throw InvalidArgumentError("'examples' value is an empty array");
  std::vector<std::string> serialized;
  for (const json& example : examples) {
    std::map<std::string, FeatureValues> features = context;
    std::map<std::string, FeatureValues> own;
    add_features(example, own);
    for (auto& [name, values] : own) features[name] = std::move(values);
    data::ExampleBuilder builder;
    for (const auto& [name, values] : features) {
      switch (values.kind) {
        case Kind::kNone:
          builder.add_empty(name);
          break;
        case Kind::kBytes:
          builder.add_bytes(name, values.bytes);
          break;
        case Kind::kInt64:
          builder.add_int64s(name, values.int64s);
          break;
        case Kind::kFloat:
          builder.add_floats(name, values.floats);
          break;
      }
    }
    serialized.push_back(builder.serialize());
  }
  return serialized;
}

}  // namespace est::serving
