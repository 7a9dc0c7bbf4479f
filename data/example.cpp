// Example parsing and building over the generated Protobuf classes.
#include "data/example.h"

#include <cstring>

#include "data/stages.h"
#include "data/tfrecord.h"
#include "example.pb.h"

namespace est::data {

namespace {

namespace pb = est::data::proto;

// Where a record came from, for messages; only turned into text when something is wrong, so
// that parsing a record does not build a string.
struct Where {
  std::string_view text;              // used when path is null
  const std::string* path = nullptr;  // a file ...
  int64_t record = 0;                 // ... and the record's index in it
  std::string str() const {
    return path ? "'" + *path + "' record " + std::to_string(record) : std::string(text);
  }
};

std::string expected_list(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float_list";
    case DType::kI64:
      return "int64_list";
    case DType::kU8:
      return "bytes_list";
    default:
      return "?";
  }
}

std::string found_list(const pb::Feature& feature) {
  switch (feature.kind_case()) {
    case pb::Feature::kFloatList:
      return "float_list";
    case pb::Feature::kInt64List:
      return "int64_list";
    case pb::Feature::kBytesList:
      return "bytes_list";
    default:
      return "empty feature";
  }
}

void check_spec(const std::string& name, const FeatureSpec& spec) {
  auto bad_dtype = [&](DType dtype, const char* allowed) {
    throw InvalidArgumentError("feature spec '" + name + "': dtype " +
                               std::string(ops::dtype_name(dtype)) + " is not supported; use " +
                               allowed);
  };
  if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
    if (fixed->dtype != DType::kF32 && fixed->dtype != DType::kI64 && fixed->dtype != DType::kU8)
      bad_dtype(fixed->dtype, "float32, int64 or uint8 (bytes)");
    for (int64_t d : fixed->shape)
      if (d < 0)
        throw InvalidArgumentError(
            "feature spec '" + name + "': shape " + ops::shape_str(fixed->shape) +
            " has an unknown dimension; use VarLenFeature for variable lengths");
    if (fixed->dtype == DType::kU8 && fixed->shape.size() > 1)
      throw InvalidArgumentError("feature spec '" + name +
                                 "': bytes features take shape {} or {k}");
    if (fixed->default_value && fixed->default_value->size() != 1 &&
        static_cast<int64_t>(fixed->default_value->size()) != ops::num_elements(fixed->shape))
      throw InvalidArgumentError("feature spec '" + name + "': default_value has " +
                                 std::to_string(fixed->default_value->size()) +
                                 " values; give one, or one per element of shape " +
                                 ops::shape_str(fixed->shape));
  } else {
    DType dtype = std::get<VarLenFeature>(spec).dtype;
    if (dtype == DType::kU8)
      throw UnimplementedError("feature spec '" + name +
                               "': variable-length bytes features are "
                               "not supported; use FixedLenFeature{{}, kU8} for one string");
    if (dtype != DType::kF32 && dtype != DType::kI64) bad_dtype(dtype, "float32 or int64");
  }
}

// The number of values in a float or int64 feature.
int64_t numeric_count(const pb::Feature& feature, DType dtype) {
  return dtype == DType::kF32 ? feature.float_list().value_size()
                              : feature.int64_list().value_size();
}

// The values of a float or int64 feature in wire order, as a tensor of `shape` (which holds
// exactly numeric_count() values; {n} for variable-length features).
Tensor numeric_values(const pb::Feature& feature, DType dtype, const Shape& shape) {
  Tensor out = Tensor::empty(shape, dtype);
  if (dtype == DType::kF32) {
    const auto& list = feature.float_list().value();
    if (list.size()) std::memcpy(out.raw_data(), list.data(), sizeof(float) * list.size());
  } else {
    const auto& list = feature.int64_list().value();
    if (list.size()) std::memcpy(out.raw_data(), list.data(), sizeof(int64_t) * list.size());
  }
  return out;
}

bool kind_matches(const pb::Feature& feature, DType dtype) {
  switch (feature.kind_case()) {
    case pb::Feature::kFloatList:
      return dtype == DType::kF32;
    case pb::Feature::kInt64List:
      return dtype == DType::kI64;
    case pb::Feature::kBytesList:
      return dtype == DType::kU8;
    default:
      return true;  // a feature with no list set reads as an empty list
  }
}

Tensor bytes_values(const pb::Feature& feature, const FixedLenFeature& spec,
                    const std::string& name, const Where& where) {
  const auto& list = feature.bytes_list().value();
  int64_t expected = ops::num_elements(spec.shape);
  if (list.size() != expected)
    throw InvalidArgumentError(where.str() + ": feature '" + name + "' has " +
                               std::to_string(list.size()) + " byte strings; the spec's shape " +
                               ops::shape_str(spec.shape) + " needs " + std::to_string(expected));
  if (spec.shape.empty()) return bytes_tensor(list.Get(0));
  size_t length = list.empty() ? 0 : list.Get(0).size();
  for (const std::string& s : list)
    if (s.size() != length)
      throw InvalidArgumentError(where.str() + ": feature '" + name +
                                 "' holds byte strings of different lengths; a {k} bytes feature "
                                 "needs equal lengths (parse them one per feature instead)");
  Tensor out = Tensor::empty({list.size(), static_cast<int64_t>(length)}, DType::kU8);
  char* dst = static_cast<char*>(out.raw_data());
  for (const std::string& s : list) {
    if (length) std::memcpy(dst, s.data(), length);
    dst += length;
  }
  return out;
}

Tensor default_tensor(const FixedLenFeature& spec, const std::string& name, const Where& where) {
  if (spec.dtype == DType::kU8) {
    if (!spec.default_bytes)
      throw InvalidArgumentError(where.str() + ": feature '" + name +
                                 "' is missing and its spec has no default_bytes");
    if (!spec.shape.empty())
      throw InvalidArgumentError(where.str() + ": feature '" + name +
                                 "' is missing; default_bytes fills shape {} features only");
    return bytes_tensor(*spec.default_bytes);
  }
  if (!spec.default_value)
    throw InvalidArgumentError(where.str() + ": feature '" + name +
                               "' is missing and its spec has no default_value; add one or fix "
                               "the data");
  const std::vector<double>& values = *spec.default_value;
  Tensor out = Tensor::empty(spec.shape, spec.dtype);
  int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    double v = values.size() == 1 ? values[0] : values[static_cast<size_t>(i)];
    if (spec.dtype == DType::kF32)
      out.data<float>()[i] = static_cast<float>(v);
    else
      out.data<int64_t>()[i] = static_cast<int64_t>(v);
  }
  return out;
}

Tensor parse_feature(const pb::Features& features, const std::string& name, const FeatureSpec& spec,
                     const Where& where) {
  auto found = features.feature().find(name);
  if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
    if (found == features.feature().end()) return default_tensor(*fixed, name, where);
    const pb::Feature& feature = found->second;
    if (!kind_matches(feature, fixed->dtype))
      throw InvalidArgumentError(where.str() + ": feature '" + name + "' is a " +
                                 found_list(feature) + " but the spec asks for " +
                                 std::string(ops::dtype_name(fixed->dtype)) + " (" +
                                 expected_list(fixed->dtype) + ")");
    if (fixed->dtype == DType::kU8) return bytes_values(feature, *fixed, name, where);
    int64_t count = numeric_count(feature, fixed->dtype);
    if (count != ops::num_elements(fixed->shape))
      throw InvalidArgumentError(where.str() + ": feature '" + name + "' has " +
                                 std::to_string(count) + " values; the spec's shape " +
                                 ops::shape_str(fixed->shape) + " needs " +
                                 std::to_string(ops::num_elements(fixed->shape)));
    return numeric_values(feature, fixed->dtype, fixed->shape);
  }
  const auto& var = std::get<VarLenFeature>(spec);
  if (found == features.feature().end()) return Tensor::empty({0}, var.dtype);
  if (!kind_matches(found->second, var.dtype))
    throw InvalidArgumentError(where.str() + ": feature '" + name + "' is a " +
                               found_list(found->second) + " but the spec asks for " +
                               std::string(ops::dtype_name(var.dtype)) + " (" +
                               expected_list(var.dtype) + ")");
  return numeric_values(found->second, var.dtype, {numeric_count(found->second, var.dtype)});
}

// Each thread parses into a protobuf arena that is reset per record: the map entries, strings
// and lists of an Example then cost no malloc/free (they dominated parsing before).
class ParseArena {
 public:
  ParseArena() : block_(kBlockBytes), arena_(options()) {}
  pb::Example* fresh_example() {
    arena_.Reset();
    return google::protobuf::Arena::CreateMessage<pb::Example>(&arena_);
  }

 private:
  static constexpr size_t kBlockBytes = size_t{64} << 10;
  google::protobuf::ArenaOptions options() {
    google::protobuf::ArenaOptions options;
    options.initial_block = block_.data();
    options.initial_block_size = block_.size();
    return options;
  }
  std::vector<char> block_;
  google::protobuf::Arena arena_;
};

// The parsed message lives in this thread's arena until the next call.
const pb::Example& parse_proto(std::string_view serialized, const Where& where) {
  thread_local ParseArena arena;
  pb::Example& example = *arena.fresh_example();
  if (serialized.size() > static_cast<size_t>(INT32_MAX) ||
      !example.ParseFromArray(serialized.data(), static_cast<int>(serialized.size())))
    throw DataLossError(where.str() + ": " + std::to_string(serialized.size()) +
                        " bytes are not a valid serialised tf.train.Example (malformed protobuf); "
                        "the record is corrupt or holds something else");
  return example;
}

// The specs are checked by the callers, once rather than per record.
Features parse_record(std::string_view serialized, const FeatureSpecs& specs, const Where& where) {
  const pb::Example& example = parse_proto(serialized, where);
  Features out;
  for (const auto& [name, spec] : specs)
    out.emplace_hint(out.end(), name, parse_feature(example.features(), name, spec, where));
  return out;
}

}  // namespace

Features parse_single_example(std::string_view serialized, const FeatureSpecs& specs,
                              std::string_view where) {
  for (const auto& [name, spec] : specs) check_spec(name, spec);
  return parse_record(serialized, specs, Where{.text = where});
}

Features parse_example(std::span<const std::string> serialized, const FeatureSpecs& specs) {
  std::vector<Features> parsed;
  parsed.reserve(serialized.size());
  for (size_t i = 0; i < serialized.size(); ++i)
    parsed.push_back(
        parse_single_example(serialized[i], specs, "serialized example " + std::to_string(i)));
  int64_t batch = static_cast<int64_t>(serialized.size());
  Features out;
  for (const auto& [name, spec] : specs) {
    const auto* var = std::get_if<VarLenFeature>(&spec);
    if (!var || var->mode == VarLenMode::kPadded) {
      // Fixed features: stack. Padded: [batch, longest], filled with padding_value first.
      Shape inner;
      if (var) {
        int64_t longest = 0;
        for (const Features& f : parsed) longest = std::max(longest, f.at(name).numel());
        inner = {longest};
      } else {
        inner = parsed.empty() ? std::get<FixedLenFeature>(spec).shape : parsed[0].at(name).shape();
        for (size_t i = 1; i < parsed.size(); ++i)
          if (parsed[i].at(name).shape() != inner)
            throw InvalidArgumentError("parse_example: bytes feature '" + name + "' of example " +
                                       std::to_string(i) + " has shape " +
                                       ops::shape_str(parsed[i].at(name).shape()) +
                                       " but example 0's has " + ops::shape_str(inner) +
                                       "; byte strings batched together need equal lengths");
      }
      Shape shape{batch};
      shape.insert(shape.end(), inner.begin(), inner.end());
      DType dtype = var ? var->dtype : std::get<FixedLenFeature>(spec).dtype;
      Tensor stacked = Tensor::full(shape, var ? var->padding_value : 0.0, dtype);
      size_t slot = static_cast<size_t>(ops::num_elements(inner)) * ops::dtype_size(dtype);
      char* dst = static_cast<char*>(stacked.raw_data());
      for (int64_t i = 0; i < batch; ++i) {
        const Tensor& part = parsed[static_cast<size_t>(i)].at(name);
        if (part.nbytes())
          std::memcpy(dst + static_cast<size_t>(i) * slot, part.raw_data(), part.nbytes());
      }
      out.emplace(name, stacked);
    } else {
      int64_t total = 0;
      for (const Features& f : parsed) total += f.at(name).numel();
      Tensor values = Tensor::empty({total}, var->dtype);
      Tensor splits = Tensor::empty({batch + 1}, DType::kI64);
      int64_t* split = splits.data<int64_t>();
      split[0] = 0;
      char* dst = static_cast<char*>(values.raw_data());
      for (int64_t i = 0; i < batch; ++i) {
        const Tensor& part = parsed[static_cast<size_t>(i)].at(name);
        if (part.nbytes()) std::memcpy(dst, part.raw_data(), part.nbytes());
        dst += part.nbytes();
        split[i + 1] = split[i] + part.numel();
      }
      out.emplace(name, values);
      out.emplace(name + "/row_splits", splits);
    }
  }
  return out;
}

namespace {

// parse_record, with `label_key` (when not empty) going to the labels rather than into the
// features and out again (a map node less to allocate and free per record).
Element parse_element(std::string_view serialized, const FeatureSpecs& specs,
                      const std::string& label_key, const Where& where) {
  const pb::Example& example = parse_proto(serialized, where);
  Element element;
  bool labelled = false;
  for (const auto& [name, spec] : specs) {
    Tensor tensor = parse_feature(example.features(), name, spec, where);
    if (!labelled && !label_key.empty() && name == label_key) {
      element.labels = std::move(tensor);
      labelled = true;
    } else {
      element.features.emplace_hint(element.features.end(), name, std::move(tensor));
    }
  }
  if (!label_key.empty() && !labelled)
    throw InvalidArgumentError(where.str() + ": label_key '" + label_key +
                               "' is not in the feature spec; add it to the spec");
  return element;
}

void check_specs(const FeatureSpecs& specs, const std::string& label_key) {
  for (const auto& [name, spec] : specs) check_spec(name, spec);
  if (!label_key.empty() && !specs.count(label_key))
    throw InvalidArgumentError("label_key '" + label_key + "' is not in the feature spec");
}

class ExampleFileReader final : public FileReader {
 public:
  ExampleFileReader(const std::string& path, const ExampleDatasetOptions& options,
                    const FeatureSpecs& specs)
      : reader_(path, options.compression), options_(options), specs_(specs) {}

  std::optional<Element> next() override {
    int64_t index = reader_.record_index();
    if (!reader_.read(record_)) return std::nullopt;
    Where where{.path = &reader_.path(), .record = index};
    return parse_element(record_, specs_, options_.label_key, where);
  }

  void save(StateWriter& writer) override { reader_.save_position(writer); }
  void restore(StateReader& reader) override { reader_.restore_position(reader); }

 private:
  TFRecordReader reader_;
  const ExampleDatasetOptions& options_;
  const FeatureSpecs& specs_;
  std::string record_;
};

}  // namespace

MapFn example_parser(FeatureSpecs specs, std::string label_key) {
  check_specs(specs, label_key);
  return [specs = std::move(specs), label_key = std::move(label_key)](Element element) {
    if (!element.value.defined() || element.value.dtype() != DType::kU8)
      throw InvalidArgumentError(
          "example_parser: expected elements holding a serialised Example "
          "as a uint8 value (what tfrecord_dataset yields), got " +
          structure_str(element));
    std::string_view record(static_cast<const char*>(element.value.raw_data()),
                            element.value.nbytes());
    Where where{.text = "serialized example"};
    return parse_element(record, specs, label_key, where);
  };
}

Dataset example_dataset(std::vector<std::string> paths, FeatureSpecs specs,
                        ExampleDatasetOptions options) {
  if (paths.empty()) throw InvalidArgumentError("example_dataset: no file names given");
  check_specs(specs, options.label_key);
  auto shared = std::make_shared<std::pair<FeatureSpecs, ExampleDatasetOptions>>(
      std::move(specs), std::move(options));
  return Dataset(make_file_source_node(
      std::move(paths),
      [shared](const std::string& path) {
        return std::make_unique<ExampleFileReader>(path, shared->second, shared->first);
      },
      "tfrecord_examples", "example_dataset"));
}

// --- Building ---

struct ExampleBuilder::Impl {
  pb::Example example;
};

ExampleBuilder::ExampleBuilder() : impl_(std::make_unique<Impl>()) {}
ExampleBuilder::~ExampleBuilder() = default;
ExampleBuilder::ExampleBuilder(ExampleBuilder&&) noexcept = default;
ExampleBuilder& ExampleBuilder::operator=(ExampleBuilder&&) noexcept = default;

ExampleBuilder& ExampleBuilder::add_floats(const std::string& name, std::span<const float> values) {
  auto* list = (*impl_->example.mutable_features()->mutable_feature())[name].mutable_float_list();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_int64s(const std::string& name,
                                           std::span<const int64_t> values) {
  auto* list = (*impl_->example.mutable_features()->mutable_feature())[name].mutable_int64_list();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& name,
                                          const std::vector<std::string>& values) {
  auto* list = (*impl_->example.mutable_features()->mutable_feature())[name].mutable_bytes_list();
  for (const std::string& value : values) list->add_value(value);
  return *this;
}

std::string ExampleBuilder::serialize() const {
  std::string out;
  impl_->example.SerializeToString(&out);
  return out;
}

std::string serialize_example(const Features& features) {
  ExampleBuilder builder;
  for (const auto& [name, tensor] : features) {
    switch (tensor.dtype()) {
      case DType::kF32:
        builder.add_floats(name,
                           std::span(tensor.data<float>(), static_cast<size_t>(tensor.numel())));
        break;
      case DType::kF64:
      case DType::kBF16:
        builder.add_floats(name, tensor.to_vector<float>());
        break;
      case DType::kI64:
        builder.add_int64s(name,
                           std::span(tensor.data<int64_t>(), static_cast<size_t>(tensor.numel())));
        break;
      case DType::kI32:
      case DType::kBool:
        builder.add_int64s(name, tensor.to_vector<int64_t>());
        break;
      case DType::kU8:
        builder.add_bytes(name, {tensor_bytes(tensor)});
        break;
    }
  }
  return builder.serialize();
}

}  // namespace est::data
