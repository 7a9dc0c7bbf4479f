// Example parsing and building over the generated Protobuf classes.
#include "data/example.h"

#include <cmath>
#include <cstring>

#include "data/example_parsing.h"
#include "data/stages.h"
#include "data/tfrecord.h"

namespace est::data {

namespace detail {

std::string expected_list(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float_list";
    case DType::kI64:
      return "int64_list";
    default:
      return "bytes_list";
  }
}

std::string found_list(const pb::Feature& feature) {
  switch (feature.kind_case()) {
    case pb::Feature::kFloatList:
      return "float_list";
    case pb::Feature::kInt64List:
      return "int64_list";
    default:
      return "bytes_list";
  }
}

}  // namespace detail

using namespace detail;

namespace {

// A default's count: one (broadcast) or one per element of the shape.
void check_default_count(const std::string& name, size_t count, const Shape& shape,
                         const char* field) {
  if (count != 1 && static_cast<int64_t>(count) != ops::num_elements(shape))
    throw InvalidArgumentError("feature spec '" + name + "': " + field + " has " +
                               std::to_string(count) +
                               " values; give one, or one per element "
                               "of shape " +
                               ops::shape_str(shape));
}

}  // namespace

void detail::check_spec(const std::string& name, const FeatureSpec& spec) {
  if (const auto* sparse = std::get_if<SparseFeature>(&spec))
    return check_sparse_spec(name, *sparse);
  if (const auto* sequence = std::get_if<FixedLenSequenceFeature>(&spec)) {
    if (!sequence->allow_missing)
      throw InvalidArgumentError("feature spec '" + name +
                                 "': a FixedLenSequenceFeature in an Example spec requires "
                                 "allow_missing = true (as TF's parse_example does)");
    return check_sequence_spec(name, *sequence);
  }
  auto bad_dtype = [&](DType dtype, const char* allowed) {
    throw InvalidArgumentError("feature spec '" + name + "': dtype " +
                               std::string(ops::dtype_name(dtype)) + " is not supported; use " +
                               allowed);
  };
  if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
    if (fixed->dtype != DType::kF32 && fixed->dtype != DType::kI64 &&
        fixed->dtype != DType::kString && fixed->dtype != DType::kU8)
      bad_dtype(fixed->dtype, "float32, int64, string, or uint8 (one byte string)");
    for (int64_t d : fixed->shape)
      if (d < 0)
        throw InvalidArgumentError(
            "feature spec '" + name + "': shape " + ops::shape_str(fixed->shape) +
            " has an unknown dimension; use VarLenFeature for variable lengths");
    if (fixed->dtype == DType::kU8 && fixed->shape.size() > 1)
      throw InvalidArgumentError("feature spec '" + name +
                                 "': bytes features take shape {} or {k}");
    if (fixed->default_value) {
      check_default_count(name, fixed->default_value->size(), fixed->shape, "default_value");
      if (fixed->dtype == DType::kI64)
        for (double v : *fixed->default_value)
          if (v != static_cast<double>(static_cast<int64_t>(v)) || std::abs(v) > 0x1p53)
            throw InvalidArgumentError("feature spec '" + name + "': int64 default_value " +
                                       std::to_string(v) +
                                       " is not an integer a double holds "
                                       "exactly; give it as default_int64");
    }
    if (fixed->default_int64)
      check_default_count(name, fixed->default_int64->size(), fixed->shape, "default_int64");
    if (fixed->default_strings)
      check_default_count(name, fixed->default_strings->size(), fixed->shape, "default_strings");
  } else {
    DType dtype = std::get<VarLenFeature>(spec).dtype;
    if (dtype != DType::kF32 && dtype != DType::kI64 && dtype != DType::kString)
      bad_dtype(dtype, "float32, int64 or string");
  }
}

// The number of values in a feature's list of the spec's kind.
int64_t detail::value_count(const pb::Feature& feature, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return feature.float_list().value_size();
    case DType::kI64:
      return feature.int64_list().value_size();
    default:
      return feature.bytes_list().value_size();
  }
}

Tensor detail::list_values(const pb::Feature& feature, DType dtype, const Shape& shape) {
  Tensor out = Tensor::empty(shape, dtype);
  if (dtype == DType::kF32) {
    const auto& list = feature.float_list().value();
    if (list.size()) std::memcpy(out.raw_data(), list.data(), sizeof(float) * list.size());
  } else if (dtype == DType::kI64) {
    const auto& list = feature.int64_list().value();
    if (list.size()) std::memcpy(out.raw_data(), list.data(), sizeof(int64_t) * list.size());
  } else {
    std::string* dst = out.data<std::string>();
    for (const std::string& value : feature.bytes_list().value()) *dst++ = value;
  }
  return out;
}

bool detail::kind_matches(const pb::Feature& feature, DType dtype) {
  switch (feature.kind_case()) {
    case pb::Feature::kFloatList:
      return dtype == DType::kF32;
    case pb::Feature::kInt64List:
      return dtype == DType::kI64;
    case pb::Feature::kBytesList:
      return dtype == DType::kU8 || dtype == DType::kString;
    default:
      return false;  // no list set: the callers treat the feature as missing
  }
}

const pb::Feature* detail::find_feature(const pb::Features& features, const std::string& name) {
  auto found = features.feature().find(name);
  if (found == features.feature().end() || found->second.kind_case() == pb::Feature::KIND_NOT_SET)
    return nullptr;
  return &found->second;
}

InvalidArgumentError detail::wrong_kind(const Where& where, const std::string& what,
                                        const pb::Feature& feature, DType dtype) {
  return InvalidArgumentError(where.str() + ": " + what + " is a " + found_list(feature) +
                              " but the spec asks for " + std::string(ops::dtype_name(dtype)) +
                              " (" + expected_list(dtype) + ")");
}

namespace {

Tensor bytes_values(const pb::Feature& feature, const FixedLenFeature& spec,
                    const std::string& name, const Where& where) {
  const auto& list = feature.bytes_list().value();
  if (spec.shape.empty()) return bytes_tensor(list.Get(0));
  size_t length = list.empty() ? 0 : list.Get(0).size();
  for (const std::string& s : list)
    if (s.size() != length)
      throw InvalidArgumentError(where.str() + ": feature '" + name +
                                 "' holds byte strings of different lengths; a {k} bytes feature "
                                 "needs equal lengths (use dtype kString instead)");
  Tensor out = Tensor::empty({list.size(), static_cast<int64_t>(length)}, DType::kU8);
  char* dst = static_cast<char*>(out.raw_data());
  for (const std::string& s : list) {
    if (length) std::memcpy(dst, s.data(), length);
    dst += length;
  }
  return out;
}

// Element i of a default holding one value (broadcast) or one per element.
template <class T>
const T& default_at(const std::vector<T>& values, int64_t i) {
  return values.size() == 1 ? values[0] : values[static_cast<size_t>(i)];
}

Tensor default_tensor(const FixedLenFeature& spec, const std::string& name, const Where& where) {
  auto missing = [&](const char* field) {
    return InvalidArgumentError(where.str() + ": feature '" + name +
                                "' is missing and its spec has no " + field +
                                "; add one or fix the data");
  };
  if (spec.dtype == DType::kU8) {
    if (!spec.default_bytes) throw missing("default_bytes");
    if (!spec.shape.empty())
      throw InvalidArgumentError(where.str() + ": feature '" + name +
                                 "' is missing; default_bytes fills shape {} features only");
    return bytes_tensor(*spec.default_bytes);
  }
  Tensor out = Tensor::empty(spec.shape, spec.dtype);
  const int64_t n = out.numel();
  if (spec.dtype == DType::kString) {
    if (!spec.default_strings) throw missing("default_strings");
    for (int64_t i = 0; i < n; ++i)
      out.data<std::string>()[i] = default_at(*spec.default_strings, i);
  } else if (spec.dtype == DType::kI64 && spec.default_int64) {
    for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = default_at(*spec.default_int64, i);
  } else {
    if (!spec.default_value) throw missing("default_value");
    for (int64_t i = 0; i < n; ++i) {
      double v = default_at(*spec.default_value, i);
      if (spec.dtype == DType::kF32)
        out.data<float>()[i] = static_cast<float>(v);
      else
        out.data<int64_t>()[i] = static_cast<int64_t>(v);  // exact: check_spec made sure
    }
  }
  return out;
}

// A 1-D sparse tensor of dense shape [n] holding all of `values` [n].
Tensor sparse_vector(const Tensor& values) {
  const int64_t n = values.dim(0);
  Tensor indices = Tensor::empty({n, 1}, DType::kI64);
  for (int64_t i = 0; i < n; ++i) indices.data<int64_t>()[i] = i;
  return Tensor::sparse(indices, values, {n});
}

}  // namespace

Tensor detail::parse_feature(const pb::Features& features, const std::string& name,
                             const FeatureSpec& spec, const Where& where) {
  if (const auto* sparse = std::get_if<SparseFeature>(&spec))
    return parse_sparse_feature(features, name, *sparse, where);
  if (const auto* sequence = std::get_if<FixedLenSequenceFeature>(&spec))
    return parse_sequence_feature(features, name, *sequence, where);
  const pb::Feature* found = find_feature(features, name);
  const bool missing = found == nullptr;
  auto check_kind = [&](DType dtype) {
    if (!kind_matches(*found, dtype))
      throw wrong_kind(where, "feature '" + name + "'", *found, dtype);
  };
  if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
    if (missing) return default_tensor(*fixed, name, where);
    check_kind(fixed->dtype);
    int64_t count = value_count(*found, fixed->dtype);
    if (count != ops::num_elements(fixed->shape))
      throw InvalidArgumentError(where.str() + ": feature '" + name + "' has " +
                                 std::to_string(count) + " values; the spec's shape " +
                                 ops::shape_str(fixed->shape) + " needs " +
                                 std::to_string(ops::num_elements(fixed->shape)));
    if (fixed->dtype == DType::kU8) return bytes_values(*found, *fixed, name, where);
    return list_values(*found, fixed->dtype, fixed->shape);
  }
  const auto& var = std::get<VarLenFeature>(spec);
  Tensor values;
  if (missing) {
    values = Tensor::empty({0}, var.dtype);
  } else {
    check_kind(var.dtype);
    values = list_values(*found, var.dtype, {value_count(*found, var.dtype)});
  }
  return var.mode == VarLenMode::kSparse ? sparse_vector(values) : values;
}

namespace {

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

Tensor detail::missing_fixed_feature(const FixedLenFeature& spec, const std::string& name,
                                     const Where& where) {
  return default_tensor(spec, name, where);
}

const pb::Example& detail::parse_example_proto(std::string_view serialized, const Where& where) {
  return parse_proto(serialized, where);
}

Features parse_single_example(std::string_view serialized, const FeatureSpecs& specs,
                              std::string_view where) {
  for (const auto& [name, spec] : specs) check_spec(name, spec);
  return parse_record(serialized, specs, Where{.text = where});
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
    const Tensor& value = element.value;
    const bool one_string = value.defined() && value.dtype() == DType::kString &&
                            !value.is_sparse() && value.numel() == 1;
    if (!one_string && (!value.defined() || value.is_sparse() || value.dtype() != DType::kU8))
      throw InvalidArgumentError(
          "example_parser: expected elements holding a serialised Example as a uint8 value "
          "(what tfrecord_dataset yields) or one string, got " +
          structure_str(element));
    std::string_view record =
        one_string ? std::string_view(value.data<std::string>()[0])
                   : std::string_view(static_cast<const char*>(value.raw_data()), value.nbytes());
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

}  // namespace est::data
