// parse_single_sequence_example, sequence_example_parser and SequenceExampleBuilder (see
// sequence_example.h), following tensorflow/python/ops/parsing_ops.py and the
// SingleSequenceExampleParserOp of tensorflow/core/kernels/example_parsing_ops.cc: context
// features as in an Example; FeatureLists read step by step.
#include "data/sequence_example.h"

#include <algorithm>

#include "data/example_parsing.h"

namespace est::data {

using namespace detail;

namespace {

void check_context_spec(const std::string& name, const FeatureSpec& spec) {
  if (!std::holds_alternative<FixedLenFeature>(spec) &&
      !std::holds_alternative<VarLenFeature>(spec))
    throw InvalidArgumentError("context feature '" + name +
                               "': context features take FixedLenFeature or VarLenFeature "
                               "(SparseFeature and FixedLenSequenceFeature are not supported "
                               "there, as in TF)");
  check_spec(name, spec);
}

void check_sequence_spec_kind(const std::string& name, const FeatureSpec& spec) {
  if (const auto* fixed = std::get_if<FixedLenSequenceFeature>(&spec)) {
    if (fixed->default_value || fixed->default_int64 || fixed->default_string)
      throw InvalidArgumentError(
          "sequence feature '" + name +
          "': a FixedLenSequenceFeature of a SequenceExample takes no default (TF requires none; "
          "batches pad with 0 or \"\"); remove it");
    return check_sequence_spec(name, *fixed);
  }
  const auto* var = std::get_if<VarLenFeature>(&spec);
  if (!var)
    throw InvalidArgumentError("sequence feature '" + name +
                               "': sequence features take FixedLenSequenceFeature or "
                               "VarLenFeature; use context features for the others");
  if (var->mode != VarLenMode::kSparse)
    throw InvalidArgumentError("sequence feature '" + name +
                               "': a VarLenFeature of a SequenceExample parses to a sparse "
                               "tensor only (mode kSparse)");
  check_spec(name, spec);
}

// [T, ...shape]: every step holds one element of the spec's shape.
Tensor parse_fixed_list(const pb::FeatureList* list, const std::string& name,
                        const FixedLenSequenceFeature& spec, const Where& where) {
  const int64_t stride = ops::num_elements(spec.shape);
  Shape shape{list ? list->feature_size() : 0};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  Tensor out = Tensor::empty(shape, spec.dtype);
  const size_t element = ops::dtype_size(spec.dtype);
  for (int64_t t = 0; t < shape[0]; ++t) {
    const pb::Feature& feature = list->feature(static_cast<int>(t));
    const std::string what = "feature list '" + name + "' step " + std::to_string(t);
    if (feature.kind_case() != pb::Feature::KIND_NOT_SET && !kind_matches(feature, spec.dtype))
      throw wrong_kind(where, what, feature, spec.dtype);
    const int64_t count =
        feature.kind_case() == pb::Feature::KIND_NOT_SET ? 0 : value_count(feature, spec.dtype);
    if (count != stride)
      throw InvalidArgumentError(where.str() + ": " + what + " has " + std::to_string(count) +
                                 " values; the FixedLenSequenceFeature's shape " +
                                 ops::shape_str(spec.shape) + " needs " + std::to_string(stride) +
                                 " per step");
    const Tensor step = list_values(feature, spec.dtype, spec.shape);
    copy_elements(element_pointer(out) + static_cast<size_t>(t * stride) * element,
                  element_pointer(step), step.nbytes(), spec.dtype);
  }
  return out;
}

// Sparse [T, most values in a step], indices (step, position).
Tensor parse_var_list(const pb::FeatureList* list, const std::string& name, DType dtype,
                      const Where& where) {
  const int64_t steps = list ? list->feature_size() : 0;
  std::vector<Tensor> values;
  int64_t total = 0, most = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const pb::Feature& feature = list->feature(static_cast<int>(t));
    if (feature.kind_case() == pb::Feature::KIND_NOT_SET) {
      values.push_back(Tensor::empty({0}, dtype));
      continue;
    }
    if (!kind_matches(feature, dtype))
      throw wrong_kind(where, "feature list '" + name + "' step " + std::to_string(t), feature,
                       dtype);
    values.push_back(list_values(feature, dtype, {value_count(feature, dtype)}));
    total += values.back().dim(0);
    most = std::max(most, values.back().dim(0));
  }
  Tensor indices = Tensor::empty({total, 2}, DType::kI64);
  Tensor out = Tensor::empty({total}, dtype);
  int64_t* index = indices.data<int64_t>();
  char* dst = element_pointer(out);
  for (int64_t t = 0; t < steps; ++t) {
    const Tensor& step = values[static_cast<size_t>(t)];
    for (int64_t j = 0; j < step.dim(0); ++j) {
      *index++ = t;
      *index++ = j;
    }
    copy_elements(dst, element_pointer(step), step.nbytes(), dtype);
    dst += step.nbytes();
  }
  return Tensor::sparse(indices, out, {steps, most});
}

}  // namespace

void detail::check_sequence_example_specs(const FeatureSpecs& context_features,
                                          const FeatureSpecs& sequence_features) {
  if (context_features.empty() && sequence_features.empty())
    throw InvalidArgumentError(
        "parse_sequence_example: no context or sequence features given; give at least one");
  for (const auto& [name, spec] : context_features) check_context_spec(name, spec);
  for (const auto& [name, spec] : sequence_features) check_sequence_spec_kind(name, spec);
}

ParsedSequenceExample detail::parse_sequence_record(std::string_view serialized,
                                                    const FeatureSpecs& context_features,
                                                    const FeatureSpecs& sequence_features,
                                                    const Where& where) {
  pb::SequenceExample example;
  if (serialized.size() > static_cast<size_t>(INT32_MAX) ||
      !example.ParseFromArray(serialized.data(), static_cast<int>(serialized.size())))
    throw DataLossError(where.str() + ": " + std::to_string(serialized.size()) +
                        " bytes are not a valid serialised tf.train.SequenceExample (malformed "
                        "protobuf); the record is corrupt or holds something else");
  ParsedSequenceExample out;
  for (const auto& [name, spec] : context_features)
    out.context.emplace_hint(out.context.end(), name,
                             parse_feature(example.context(), name, spec, where));
  const auto& lists = example.feature_lists().feature_list();
  for (const auto& [name, spec] : sequence_features) {
    auto found = lists.find(name);
    const pb::FeatureList* list = found == lists.end() ? nullptr : &found->second;
    Tensor tensor;
    if (const auto* fixed = std::get_if<FixedLenSequenceFeature>(&spec)) {
      if (!list && !fixed->allow_missing)
        throw InvalidArgumentError(where.str() + ": feature list '" + name +
                                   "' is required but could not be found; set allow_missing in "
                                   "its FixedLenSequenceFeature to treat it as empty");
      tensor = parse_fixed_list(list, name, *fixed, where);
    } else {
      tensor = parse_var_list(list, name, std::get<VarLenFeature>(spec).dtype, where);
    }
    out.sequence.emplace_hint(out.sequence.end(), name, std::move(tensor));
  }
  return out;
}

ParsedSequenceExample parse_single_sequence_example(std::string_view serialized,
                                                    const FeatureSpecs& context_features,
                                                    const FeatureSpecs& sequence_features,
                                                    std::string_view where) {
  check_sequence_example_specs(context_features, sequence_features);
  return parse_sequence_record(serialized, context_features, sequence_features,
                               Where{.text = where});
}

MapFn sequence_example_parser(FeatureSpecs context_features, FeatureSpecs sequence_features,
                              std::string label_key) {
  check_sequence_example_specs(context_features, sequence_features);
  for (const auto& [name, spec] : context_features)
    if (sequence_features.count(name))
      throw InvalidArgumentError("sequence_example_parser: '" + name +
                                 "' is both a context and a sequence feature; one element's "
                                 "features hold one tensor per name (use "
                                 "parse_single_sequence_example to get both)");
  if (!label_key.empty() && !context_features.count(label_key) &&
      !sequence_features.count(label_key))
    throw InvalidArgumentError("sequence_example_parser: label_key '" + label_key +
                               "' is in neither the context nor the sequence features");
  return [context_features = std::move(context_features),
          sequence_features = std::move(sequence_features),
          label_key = std::move(label_key)](Element element) {
    const Tensor& value = element.value;
    const bool one_string = value.defined() && value.dtype() == DType::kString &&
                            !value.is_sparse() && value.numel() == 1;
    if (!one_string && (!value.defined() || value.is_sparse() || value.dtype() != DType::kU8))
      throw InvalidArgumentError(
          "sequence_example_parser: expected elements holding a serialised SequenceExample as a "
          "uint8 value (what tfrecord_dataset yields) or one string, got " +
          structure_str(element));
    std::string_view record =
        one_string ? std::string_view(value.data<std::string>()[0])
                   : std::string_view(static_cast<const char*>(value.raw_data()), value.nbytes());
    ParsedSequenceExample parsed = parse_sequence_record(
        record, context_features, sequence_features, Where{.text = "serialized sequence example"});
    Element out;
    out.features = std::move(parsed.context);
    out.features.merge(parsed.sequence);
    if (!label_key.empty()) {
      auto node = out.features.extract(label_key);
      out.labels = std::move(node.mapped());
    }
    return out;
  };
}

struct SequenceExampleBuilder::Impl {
  pb::SequenceExample example;
  pb::Feature& context(const std::string& name) {
    return (*example.mutable_context()->mutable_feature())[name];
  }
  pb::FeatureList& list(const std::string& name) {
    pb::FeatureList& list = (*example.mutable_feature_lists()->mutable_feature_list())[name];
    list.Clear();
    return list;
  }
};

SequenceExampleBuilder::SequenceExampleBuilder() : impl_(std::make_unique<Impl>()) {}
SequenceExampleBuilder::~SequenceExampleBuilder() = default;
SequenceExampleBuilder::SequenceExampleBuilder(SequenceExampleBuilder&&) noexcept = default;
SequenceExampleBuilder& SequenceExampleBuilder::operator=(SequenceExampleBuilder&&) noexcept =
    default;

SequenceExampleBuilder& SequenceExampleBuilder::context_floats(const std::string& name,
                                                               std::span<const float> values) {
  impl_->context(name).mutable_float_list()->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

SequenceExampleBuilder& SequenceExampleBuilder::context_int64s(const std::string& name,
                                                               std::span<const int64_t> values) {
  impl_->context(name).mutable_int64_list()->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

SequenceExampleBuilder& SequenceExampleBuilder::context_bytes(
    const std::string& name, const std::vector<std::string>& values) {
  for (const std::string& value : values)
    impl_->context(name).mutable_bytes_list()->add_value(value);
  return *this;
}

SequenceExampleBuilder& SequenceExampleBuilder::feature_list_floats(
    const std::string& name, const std::vector<std::vector<float>>& steps) {
  pb::FeatureList& list = impl_->list(name);
  for (const auto& step : steps)
    list.add_feature()->mutable_float_list()->mutable_value()->Add(step.begin(), step.end());
  return *this;
}

SequenceExampleBuilder& SequenceExampleBuilder::feature_list_int64s(
    const std::string& name, const std::vector<std::vector<int64_t>>& steps) {
  pb::FeatureList& list = impl_->list(name);
  for (const auto& step : steps)
    list.add_feature()->mutable_int64_list()->mutable_value()->Add(step.begin(), step.end());
  return *this;
}

SequenceExampleBuilder& SequenceExampleBuilder::feature_list_bytes(
    const std::string& name, const std::vector<std::vector<std::string>>& steps) {
  pb::FeatureList& list = impl_->list(name);
  for (const auto& step : steps) {
    pb::BytesList* bytes = list.add_feature()->mutable_bytes_list();
    for (const std::string& value : step) bytes->add_value(value);
  }
  return *this;
}

std::string SequenceExampleBuilder::serialize() const {
  std::string out;
  impl_->example.SerializeToString(&out);
  return out;
}

}  // namespace est::data
