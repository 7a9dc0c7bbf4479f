// Keras's (x, y) structures in est's elements, packed and unpacked (see data_adapter.h).
#include "keras/data_adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "keras/compile_utils.h"
#include "ops/error.h"

namespace est::keras {
namespace {

constexpr std::string_view kPosition = "#";         // x's i-th: "#<i>"
constexpr std::string_view kTarget = "labels#";     // y by name: "labels#<name>"
constexpr std::string_view kTargetAt = "labels##";  // y's i-th: "labels##<i>"

void check_key(const std::string& key, const char* what) {
  if (key.empty() || key.find('#') != std::string::npos)
    throw InvalidArgumentError(fmt::format(
        "keras::pack_x_y: {} key \"{}\" is empty or has '#', which no Keras layer name has; key "
        "{} by the model's {} names",
        what, key, what, what == std::string_view("x") ? "Input" : "output"));
}

// The index in "<prefix><i>", or nullopt when `key` is not of that form.
std::optional<size_t> position(std::string_view key, std::string_view prefix) {
  if (key.substr(0, prefix.size()) != prefix || key.size() == prefix.size()) return std::nullopt;
  size_t index = 0;
  auto digits = key.substr(prefix.size());
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return index;
}

// A tuple's tensors (keyed by position) in order: one per name, else InvalidArgumentError.
std::vector<Tensor> in_order(const std::map<size_t, Tensor>& tuple,
                             const std::vector<std::string>& names, const std::string& model,
                             const char* what, const char* part) {
  if (tuple.size() != names.size() || tuple.rbegin()->first + 1 != tuple.size())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\" has {} {} {} but the batch's {} is a tuple of {} tensors; give one tensor "
        "per entry, in that order, or key {} by name",
        model, names.size(), what, quoted_list(names), part, tuple.size(), part));
  std::vector<Tensor> out;
  for (const auto& [i, value] : tuple) out.push_back(value);
  return out;
}

}  // namespace

data::Element pack_x_y(XStructure x, YStructure y) {
  data::Element element;
  if (auto* named = std::get_if<data::Features>(&x)) {
    for (auto& [key, value] : *named) check_key(key, "x");
    element.features = std::move(*named);
  } else {
    auto& tuple = std::get<std::vector<Tensor>>(x);
    for (size_t i = 0; i < tuple.size(); ++i)
      element.features[fmt::format("{}{}", kPosition, i)] = std::move(tuple[i]);
  }
  if (auto* one = std::get_if<Tensor>(&y)) {
    element.labels = std::move(*one);
  } else if (auto* named = std::get_if<Targets>(&y)) {
    for (auto& [key, value] : *named) {
      check_key(key, "y");
      element.features[fmt::format("{}{}", kTarget, key)] = std::move(value);
    }
  } else {
    auto& tuple = std::get<std::vector<Tensor>>(y);
    for (size_t i = 0; i < tuple.size(); ++i)
      element.features[fmt::format("{}{}", kTargetAt, i)] = std::move(tuple[i]);
  }
  return element;
}

data::Dataset from_tensor_slices(XStructure x, YStructure y) {
  data::Element element = pack_x_y(std::move(x), std::move(y));
  return data::Dataset::from_tensor_slices(element.features, element.labels);
}

bool is_x_feature(const std::string& key) { return key.compare(0, kTarget.size(), kTarget) != 0; }

std::string structure_name(const std::string& key) {
  if (auto i = position(key, kTargetAt)) return fmt::format("y[{}]", *i);
  if (!is_x_feature(key)) return fmt::format("y['{}']", key.substr(kTarget.size()));
  if (auto i = position(key, kPosition)) return fmt::format("x[{}]", *i);
  return fmt::format("x['{}']", key);
}

std::vector<Tensor> unpack_x(const data::Features& features,
                             const std::vector<std::string>& input_names,
                             const std::string& model) {
  std::vector<std::string> given;
  std::map<size_t, Tensor> tuple;
  for (const auto& [key, value] : features) {
    if (!is_x_feature(key)) continue;
    given.push_back(key);
    if (auto i = position(key, kPosition)) tuple[*i] = value;
  }
  if (!tuple.empty()) return in_order(tuple, input_names, model, "inputs", "x");
  if (input_names.size() == 1 && given.size() == 1) return {features.at(given[0])};
  std::vector<Tensor> out;
  for (const auto& name : input_names) {
    auto it = features.find(name);
    if (it == features.end())
      throw InvalidArgumentError(fmt::format(
          "Model \"{}\": no feature named \"{}\" for its input of that name (the batch has: {}; "
          "the inputs are {}); name the dataset's features after the model's Input names",
          model, name, quoted_list(given), quoted_list(input_names)));
    out.push_back(it->second);
  }
  return out;
}

std::vector<Tensor> unpack_y(const data::Features& features, const Tensor& labels,
                             const std::vector<std::string>& output_names,
                             const std::string& model) {
  std::vector<Tensor> out(output_names.size());
  std::map<size_t, Tensor> tuple;
  std::vector<std::string> unknown;
  bool named = false;
  for (const auto& [key, value] : features) {
    if (is_x_feature(key)) continue;
    if (auto i = position(key, kTargetAt)) {
      tuple[*i] = value;
      continue;
    }
    named = true;
    std::string name = key.substr(kTarget.size());
    auto it = std::find(output_names.begin(), output_names.end(), name);
    if (it == output_names.end())
      unknown.push_back(name);
    else
      out[it - output_names.begin()] = value;
  }
  if (!unknown.empty())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the batch's y has keys {} that do not correspond to any model output; the "
        "output names are {}",
        model, quoted_list(unknown), quoted_list(output_names)));
  if ((named || !tuple.empty()) && labels.defined())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the batch has both a labels tensor and y by output; give y one way "
        "(keras::pack_x_y)",
        model));
  if (named && !tuple.empty())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": the batch's y is both keyed by output name and a tuple; give one of them",
        model));
  if (!tuple.empty()) {
    out = in_order(tuple, output_names, model, "outputs", "y");
  } else if (labels.defined()) {
    // One y for every output, as Keras's _conform_to_outputs broadcasts it.
    for (auto& y : out) y = labels;
  }
  return out;
}

}  // namespace est::keras
