// signatures.json's "lookups" steps to and from JSON, and their run before the graph (see
// lookup_step.h).
#include "export/lookup_step.h"

#include <charconv>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "export/servable.h"
#include "ops/error.h"
#include "ops/text_line.h"

namespace est::serving {
namespace {

using feature_column::LookupTable;
using Kind = LookupTable::Kind;

const std::pair<Kind, const char*> kKinds[] = {{Kind::kVocabulary, "vocabulary"},
                                               {Kind::kHashBucket, "hash_bucket"},
                                               {Kind::kIdentity, "identity"}};

// The first `size` lines of the asset, as the column read them.
void read_vocabulary(LookupTable& table, const std::string& export_dir, int64_t size) {
  const std::filesystem::path path = std::filesystem::path(export_dir) / table.vocabulary_file;
  std::ifstream file(path);
  if (!file) throw NotFoundError(fmt::format("cannot open the vocabulary asset {}", path.string()));
  std::vector<std::string> lines;
  for (std::string line;
       static_cast<int64_t>(lines.size()) < size && ops::read_text_line(file, line);)
    lines.push_back(std::move(line));
  if (static_cast<int64_t>(lines.size()) < size)
    throw DataLossError(fmt::format("the vocabulary asset {} has {} lines; the export read {}",
                                    path.string(), lines.size(), size));
  if (table.key_dtype == DType::kString) {
    table.string_keys = std::move(lines);
    return;
  }
  for (const std::string& line : lines) {
    int64_t value = 0;
    auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error != std::errc() || end != line.data() + line.size())
      throw DataLossError(
          fmt::format("the vocabulary asset {} holds '{}', not an int64", path.string(), line));
    table.int_keys.push_back(value);
  }
}

}  // namespace

nlohmann::json to_json(const LookupStep& step) {
  const LookupTable& table = step.table;
  const char* kind = nullptr;
  for (const auto& [k, name] : kKinds)
    if (k == table.kind) kind = name;
  if (kind == nullptr)
    throw InternalError("export: an index-to-string table is not a pre-processing lookup");
  nlohmann::json json = {{"input", step.input},
                         {"output", step.output},
                         {"kind", kind},
                         {"key_dtype", tf_dtype_name(table.key_dtype)}};
  switch (table.kind) {
    case Kind::kVocabulary:
      if (!table.vocabulary_file.empty()) {
        json["vocabulary_file"] = table.vocabulary_file;
        json["vocabulary_size"] = table.vocabulary_size();
      } else if (table.key_dtype == DType::kString) {
        json["vocabulary"] = table.string_keys;
      } else {
        json["vocabulary"] = table.int_keys;
      }
      json["num_oov_buckets"] = table.num_oov_buckets;
      json["default_value"] = table.default_value;
      break;
    case Kind::kHashBucket:
      json["num_buckets"] = table.num_buckets;
      break;
    case Kind::kIdentity:
      json["num_buckets"] = table.num_buckets;
      if (table.has_default) json["default_value"] = table.default_value;
      break;
    case Kind::kIndexToString:
      break;
  }
  return json;
}

LookupStep lookup_step_from_json(const nlohmann::json& json, const std::string& export_dir) {
  LookupStep step;
  try {
    step.input = json.at("input").get<std::string>();
    step.output = json.at("output").get<std::string>();
    LookupTable& table = step.table;
    const std::string kind = json.at("kind").get<std::string>();
    bool known = false;
    for (const auto& [k, name] : kKinds)
      if (kind == name) {
        table.kind = k;
        known = true;
      }
    if (!known) throw DataLossError(fmt::format("lookup kind '{}' is unknown", kind));
    table.key_dtype = dtype_from_tf_name(json.at("key_dtype").get<std::string>());
    if (table.key_dtype != DType::kString && table.key_dtype != DType::kI64)
      throw DataLossError("a lookup's key_dtype must be DT_STRING or DT_INT64");
    if (table.kind == Kind::kVocabulary) {
      if (json.contains("vocabulary_file")) {
        table.vocabulary_file = json["vocabulary_file"].get<std::string>();
        read_vocabulary(table, export_dir, json.at("vocabulary_size").get<int64_t>());
      } else if (table.key_dtype == DType::kString) {
        table.string_keys = json.at("vocabulary").get<std::vector<std::string>>();
      } else {
        table.int_keys = json.at("vocabulary").get<std::vector<int64_t>>();
      }
      table.num_oov_buckets = json.at("num_oov_buckets").get<int64_t>();
      table.default_value = json.at("default_value").get<int64_t>();
    } else {
      table.num_buckets = json.at("num_buckets").get<int64_t>();
      if (table.num_buckets < 1) throw DataLossError("a lookup's num_buckets must be >= 1");
      if (json.contains("default_value")) {
        table.has_default = true;
        table.default_value = json["default_value"].get<int64_t>();
      }
    }
    if (table.num_oov_buckets < 0) throw DataLossError("a lookup's num_oov_buckets is negative");
  } catch (const nlohmann::json::exception& error) {
    throw DataLossError(fmt::format("'lookups' is malformed: {}", error.what()));
  } catch (const InvalidArgumentError& error) {
    throw DataLossError(fmt::format("'lookups': {}", error.what()));
  }
  step.lookup = std::make_shared<const feature_column::Lookup>(step.table);
  return step;
}

NamedTensors run_lookups(const std::vector<LookupStep>& steps, NamedTensors features,
                         const std::vector<TensorInfo>& graph_inputs) {
  NamedTensors looked_up;
  for (const LookupStep& step : steps) {
    auto found = features.find(step.input);
    if (found == features.end())
      throw InvalidArgumentError(
          fmt::format("the lookup into '{}' needs feature '{}'", step.output, step.input));
    const Tensor& raw = found->second;
    if (raw.rank() == 0)
      throw InvalidArgumentError(fmt::format("feature '{}' needs a batch dimension", step.input));
    const feature_column::Lookup own(step.table);
    const feature_column::Lookup& lookup = step.lookup ? *step.lookup : own;
    Tensor ids = lookup.ids(raw, step.input);
    // Shaped as the graph input: [batch, ...] with the batch from the feature.
    for (const TensorInfo& info : graph_inputs) {
      if (info.name != step.output) continue;
      Shape shape = info.shape;
      int64_t known = 1;
      for (size_t axis = 1; axis < shape.size(); ++axis) known *= shape[axis] < 0 ? 1 : shape[axis];
      if (!shape.empty()) shape[0] = raw.dim(0);
      for (size_t axis = 1; axis < shape.size(); ++axis)
        if (shape[axis] < 0) shape[axis] = ids.numel() / std::max<int64_t>(raw.dim(0) * known, 1);
      if (ops::num_elements(shape) != ids.numel())
        throw InvalidArgumentError(
            fmt::format("feature '{}' has shape {}; the graph takes its ids as {} (-1: any size)",
                        step.input, ops::shape_str(raw.shape()), ops::shape_str(info.shape)));
      ids = ids.reshape(shape);
    }
    looked_up[step.output] = ids;
  }
  for (auto& [name, ids] : looked_up) features[name] = std::move(ids);
  return features;
}

}  // namespace est::serving
