// Building tf.train.Example messages (ExampleBuilder, serialize_example) over the generated
// Protobuf classes, for writers and tests.
#include "data/example.h"
#include "example.pb.h"

namespace est::data {

namespace pb = est::data::proto;

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

ExampleBuilder& ExampleBuilder::add_empty(const std::string& name) {
  (*impl_->example.mutable_features()->mutable_feature())[name].Clear();
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
    if (tensor.is_sparse())
      throw InvalidArgumentError("serialize_example: feature '" + name +
                                 "' is sparse; an Example holds flat lists, serialise its "
                                 "values() instead");
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
      case DType::kString:
        builder.add_bytes(name, tensor.to_vector<std::string>());
        break;
    }
  }
  return builder.serialize();
}

}  // namespace est::data
