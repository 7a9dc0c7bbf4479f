// Tensors written as JSON text without a DOM (see rest_json_writer.h). Followed: TF Serving's
// util/json_tensor.cc (WriteDecimal: NaN, Infinity, -Infinity) and nlohmann's serializer (a
// double through detail::to_chars, strings through dump), which the DOM path writes with.
#include "export/rest_json_writer.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace est::serving {
namespace {

// True (and `out` extended) for NaN and the infinities.
bool append_non_finite(std::string& out, double value) {
  if (std::isnan(value))
    out += "NaN";
  else if (std::isinf(value))
    out += value < 0 ? "-Infinity" : "Infinity";
  else
    return false;
  return true;
}

}  // namespace

void append_float64(std::string& out, double value) {
  if (append_non_finite(out, value)) return;
  char text[64];
  const char* end = nlohmann::detail::to_chars(text, text + sizeof text, value);
  out.append(text, static_cast<size_t>(end - text));
}

void append_float32(std::string& out, float value) {
  if (append_non_finite(out, value)) return;
  // The float's shortest decimal, read back as the double closest to it (the DOM path's
  // std::stod of the same text: both round correctly), written as that double.
  char digits[32];
  const char* end = fmt::format_to_n(digits, sizeof digits, "{}", value).out;
  double widened = 0;
  std::from_chars(digits, end, widened);
  append_float64(out, widened);
}

TensorWriter::TensorWriter(const Tensor& tensor) : host_(tensor.to(Device::cpu())) {
  const DType dtype = host_.dtype();
  if (dtype == DType::kBF16)
    host_ = Tensor::from_vector(host_.to_vector<float>(), host_.shape());
  else if (dtype != DType::kF32 && dtype != DType::kF64 && dtype != DType::kString)
    integers_ = host_.to_vector<int64_t>();
}

void TensorWriter::write_scalar(std::string& out, int64_t at) const {
  switch (host_.dtype()) {
    case DType::kF32:
      append_float32(out, host_.data<float>()[at]);
      return;
    case DType::kF64:
      append_float64(out, host_.data<double>()[at]);
      return;
    case DType::kString:
      out += nlohmann::json(host_.data<std::string>()[at]).dump();
      return;
    case DType::kBool:
      out += integers_[static_cast<size_t>(at)] != 0 ? "true" : "false";
      return;
    default:
      out += fmt::format_int(integers_[static_cast<size_t>(at)]).str();
  }
}

// The values of `elements` from `begin`, nested as the axes from `depth` on.
void TensorWriter::write_values(std::string& out, int64_t begin, size_t depth,
                                int64_t elements) const {
  const Shape& shape = host_.shape();
  if (depth == shape.size()) return write_scalar(out, begin);
  const int64_t inner = elements / std::max<int64_t>(shape[depth], 1);
  out += '[';
  for (int64_t i = 0; i < shape[depth]; ++i) {
    if (i > 0) out += ',';
    write_values(out, begin + i * inner, depth + 1, inner);
  }
  out += ']';
}

void TensorWriter::write(std::string& out) const { write_values(out, 0, 0, host_.numel()); }

void TensorWriter::write_row(std::string& out, int64_t row) const {
  const int64_t row_elements = host_.numel() / std::max<int64_t>(host_.dim(0), 1);
  write_values(out, row * row_elements, 1, row_elements);
}

}  // namespace est::serving
