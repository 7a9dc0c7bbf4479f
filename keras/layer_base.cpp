// The Layer base of keras/layers.h: Keras's object names (snake_case, unique per session), the
// functional graph's nodes a layer call makes, and Input / InputLayer. The layers themselves are
// in layers.cpp.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <string>

#include "keras/layers.h"
#include "ops/error.h"

namespace est::keras {

// "MaxPooling2D" -> "max_pooling2d", "Conv2D" -> "conv2d" (generic_utils.to_snake_case: '_'
// before a capitalised word that follows any character, then between a lower and an upper case
// letter, then lower case).
std::string snake_case(const std::string& name) {
  auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  std::string first;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i > 0 && upper(name[i]) && i + 1 < name.size() && lower(name[i + 1])) first += '_';
    first += name[i];
  }
  std::string out;
  for (size_t i = 0; i < first.size(); ++i) {
    if (i > 0 && upper(first[i]) && lower(first[i - 1])) out += '_';
    out += upper(first[i]) ? static_cast<char>(first[i] - 'A' + 'a') : first[i];
  }
  return out;
}

namespace {

std::mutex names_mutex;
std::map<std::string, int64_t> name_counts;

}  // namespace

std::string unique_object_name(const std::string& base, bool zero_based) {
  std::lock_guard lock(names_mutex);
  int64_t count = name_counts[base]++;
  if (zero_based && count == 0) return base;
  return fmt::format("{}_{}", base, zero_based ? count : count + 1);
}

void clear_session() {
  std::lock_guard lock(names_mutex);
  name_counts.clear();
}

std::string shape_tuple(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += shape[i] < 0 ? "None" : std::to_string(shape[i]);
  }
  return out + (shape.size() == 1 ? ",)" : ")");
}

Layer::Layer(std::string class_name, const std::string& name, bool zero_based)
    : class_name_(std::move(class_name)),
      name_(name.empty() ? unique_object_name(snake_case(class_name_), zero_based) : name) {}

KerasTensor Layer::operator()(const KerasTensor& x) { return (*this)(std::vector<KerasTensor>{x}); }

KerasTensor Layer::operator()(const std::vector<KerasTensor>& xs) {
  if (arity() == 1 && xs.size() != 1)
    throw InvalidArgumentError(
        fmt::format("Layer \"{}\" expects 1 input, but it received {} "
                    "input tensors",
                    name(), xs.size()));
  std::vector<Shape> shapes;
  for (const auto& x : xs) {
    if (!x.node)
      throw InvalidArgumentError(fmt::format(
          "Layer \"{}\" was called on an empty KerasTensor; call it on keras::Input(...) or on "
          "another layer's output",
          name()));
    shapes.push_back(x.shape);
  }
  auto node = std::make_shared<Node>(Node{shared_from_this(), xs, output_shape(shapes)});
  return KerasTensor{node, node->output_shape};
}

namespace layers {

InputLayerImpl::InputLayerImpl(InputOptions options)
    : Layer("InputLayer", options.name.empty() ? unique_object_name("input", false) : options.name),
      options_(std::move(options)) {}

Shape InputLayerImpl::output_shape(const std::vector<Shape>&) const {
  Shape out{-1};
  out.insert(out.end(), options_.shape.begin(), options_.shape.end());
  return out;
}

Tensor InputLayerImpl::call(nn::ModelContext&, const std::vector<Tensor>& inputs) const {
  return inputs[0];
}

}  // namespace layers

KerasTensor Input(Shape shape, std::string name, ops::DType dtype) {
  auto layer = std::make_shared<layers::InputLayerImpl>(
      layers::InputOptions{.shape = std::move(shape), .dtype = dtype, .name = std::move(name)});
  auto node = std::make_shared<Node>(Node{layer, {}, layer->output_shape({})});
  return KerasTensor{node, node->output_shape};
}

}  // namespace est::keras
