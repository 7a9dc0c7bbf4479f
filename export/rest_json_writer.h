// A tensor written as the REST API's JSON text without building a DOM: the same bytes as
// answer_text(json_of(tensor)) (rest_json.h, rest_json_text.h), checked value by value in
// tests/export/rest_json_writer_test.cpp. float32 values are the shortest decimal of the float,
// laid out as nlohmann writes a double (0.1, 1e-05, 100.0, -0.0); NaN and the infinities are
// written NaN, Infinity and -Infinity as TF Serving's json_tensor.cc writes them.
#pragma once

#include <string>
#include <vector>

#include "ops/tensor.h"

namespace est::serving {

class TensorWriter {
 public:
  explicit TensorWriter(const Tensor& tensor);  // read once, on the host
  // The length of the first axis (0 for a scalar).
  int64_t rows() const { return host_.rank() == 0 ? 0 : host_.dim(0); }
  // Appends the whole tensor, or its row `row` (json_rows(tensor)[row]), to `out`.
  void write(std::string& out) const;
  void write_row(std::string& out, int64_t row) const;

 private:
  void write_values(std::string& out, int64_t begin, size_t depth, int64_t elements) const;
  void write_scalar(std::string& out, int64_t at) const;

  Tensor host_;
  std::vector<int64_t> integers_;  // the integer and bool dtypes
};

// One value as the writer writes it (for the tests and other writers).
void append_float32(std::string& out, float value);
void append_float64(std::string& out, double value);

}  // namespace est::serving
