// Tensors to and from TF Serving's JSON (see rest_json.h). Followed: TF Serving's
// api_rest.md and json_tensor.h for the formats.
#include "export/rest_json.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "data/element.h"
#include "export/json_examples.h"
#include "export/servable.h"
#include "ops/array_ops.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

Shape shape_of(const json& value) {
  if (!value.is_array()) return {};
  Shape shape{static_cast<int64_t>(value.size())};
  if (!value.empty()) {
    Shape inner = shape_of(value[0]);
    shape.insert(shape.end(), inner.begin(), inner.end());
  }
  return shape;
}

// The scalars of one tensor, by the kind of its dtype.
struct Scalars {
  std::vector<double> doubles;
  std::vector<int64_t> integers;
  std::vector<std::string> strings;
};

// Appends the scalars of `value`, which must have shape[depth:], to `scalars`.
void collect(const json& value, const Shape& shape, size_t depth, const TensorInfo& info,
             const std::string& input, Scalars& scalars) {
  if (depth < shape.size()) {
    if (!value.is_array() || static_cast<int64_t>(value.size()) != shape[depth])
      throw InvalidArgumentError(fmt::format(
          "input '{}': the lists are ragged (expected {} values at depth {}); a tensor's rows "
          "must all have one shape",
          input, shape[depth], depth));
    for (const json& element : value) collect(element, shape, depth + 1, info, input, scalars);
    return;
  }
  if (info.dtype == DType::kString) {
    if (is_base64_object(value)) {
      scalars.strings.push_back(base64_decode(value["b64"].get<std::string>()));
    } else if (value.is_string()) {
      scalars.strings.push_back(value.get<std::string>());
    } else {
      throw InvalidArgumentError(
          fmt::format("input '{}' is DT_STRING: expected a string or {{\"b64\": ...}}, got {}",
                      input, value.dump()));
    }
  } else if (info.dtype == DType::kBool) {
    if (!value.is_boolean())
      throw InvalidArgumentError(fmt::format(
          "input '{}' is DT_BOOL: expected true or false, got {}", input, value.dump()));
    scalars.integers.push_back(value.get<bool>());
  } else if (is_floating(info.dtype)) {
    if (!value.is_number())
      throw InvalidArgumentError(fmt::format("input '{}' is {}: expected a number, got {}", input,
                                             tf_dtype_name(info.dtype), value.dump()));
    scalars.doubles.push_back(value.get<double>());
  } else {
    if (!value.is_number_integer())
      throw InvalidArgumentError(fmt::format("input '{}' is {}: expected an integer, got {}", input,
                                             tf_dtype_name(info.dtype), value.dump()));
    scalars.integers.push_back(value.get<int64_t>());
  }
}

Tensor make_tensor(const TensorInfo& info, const Shape& shape, const Scalars& scalars) {
  if (info.dtype == DType::kString) return data::string_tensor(scalars.strings, shape);
  if (is_floating(info.dtype))
    return ops::cast(Tensor::from_vector(scalars.doubles, shape), info.dtype);
  return ops::cast(Tensor::from_vector(scalars.integers, shape), info.dtype);
}

void check_shape(const std::string& input, const TensorInfo& info, const Shape& shape) {
  bool fits = shape.size() == info.shape.size();
  for (size_t axis = 0; fits && axis < shape.size(); ++axis)
    fits = info.shape[axis] < 0 || info.shape[axis] == shape[axis];
  if (!fits)
    throw InvalidArgumentError(
        fmt::format("input '{}' must have shape {} (-1: any size; the first is the batch), got {}",
                    input, ops::shape_str(info.shape), ops::shape_str(shape)));
}

json json_of(const Tensor& tensor, int64_t begin, size_t depth, int64_t stride_elements,
             const std::vector<double>& doubles, const std::vector<int64_t>& integers,
             const std::vector<std::string>& strings) {
  const Shape& shape = tensor.shape();
  if (depth == shape.size()) {
    if (tensor.dtype() == DType::kString) return strings[begin];
    if (tensor.dtype() == DType::kBool) return integers[begin] != 0;
    if (is_floating(tensor.dtype())) return doubles[begin];
    return integers[begin];
  }
  const int64_t inner = stride_elements / std::max<int64_t>(shape[depth], 1);
  json list = json::array();
  for (int64_t i = 0; i < shape[depth]; ++i)
    list.push_back(
        json_of(tensor, begin + i * inner, depth + 1, inner, doubles, integers, strings));
  return list;
}

// A tensor's values on the host, by the kind of its dtype.
struct HostValues {
  Tensor host;
  std::vector<double> doubles;
  std::vector<int64_t> integers;
  std::vector<std::string> strings;
};

HostValues host_values(const Tensor& tensor) {
  HostValues values{tensor.to(Device::cpu()), {}, {}, {}};
  const Tensor& host = values.host;
  if (host.dtype() == DType::kString) {
    values.strings = host.to_vector<std::string>();
  } else if (host.dtype() == DType::kF64) {
    values.doubles = host.to_vector<double>();
  } else if (is_floating(host.dtype())) {
    // float32 values print as the float they are, not as the double they widen to
    for (float v : host.to_vector<float>())
      values.doubles.push_back(std::isfinite(v) ? std::stod(fmt::format("{}", v)) : v);
  } else {
    values.integers = host.to_vector<int64_t>();
  }
  return values;
}

}  // namespace

// Columnar: the whole tensor of one input.
Tensor tensor_from_json(const std::string& input, const TensorInfo& info, const json& value) {
  const Shape shape = shape_of(value);
  Scalars scalars;
  collect(value, shape, 0, info, input, scalars);
  check_shape(input, info, shape);
  return make_tensor(info, shape, scalars);
}

// Row format: one value per instance, stacked.
Tensor tensor_from_rows(const std::string& input, const TensorInfo& info,
                        const std::vector<const json*>& rows) {
  const Shape row_shape = shape_of(*rows.front());
  Scalars scalars;
  for (const json* row : rows) collect(*row, row_shape, 0, info, input, scalars);
  Shape shape{static_cast<int64_t>(rows.size())};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  check_shape(input, info, shape);
  return make_tensor(info, shape, scalars);
}

json json_of(const Tensor& tensor) {
  const HostValues values = host_values(tensor);
  return json_of(values.host, 0, 0, values.host.numel(), values.doubles, values.integers,
                 values.strings);
}

std::vector<json> json_rows(const Tensor& tensor) {
  const HostValues values = host_values(tensor);
  const Tensor& host = values.host;
  std::vector<json> rows;
  if (host.rank() == 0) return rows;
  const int64_t row_elements = host.numel() / std::max<int64_t>(host.dim(0), 1);
  for (int64_t row = 0; row < host.dim(0); ++row)
    rows.push_back(json_of(host, row * row_elements, 1, row_elements, values.doubles,
                           values.integers, values.strings));
  return rows;
}

const Tensor& output_of(const NamedTensors& outputs, const TensorInfo& info) {
  auto it = outputs.find(info.name);
  if (it == outputs.end())
    throw InternalError("the model has no output '" + info.name + "' its signature names");
  return it->second;
}

}  // namespace est::serving
