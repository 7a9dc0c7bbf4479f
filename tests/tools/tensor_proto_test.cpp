// est-serve's TensorProto conversion (export/grpc/tensor_proto.h) in-process, against TF's
// Tensor::FromProto rules (tensorflow/core/framework/tensor.cc): typed fields of every dtype
// est runs, fewer values than elements repeat the last and none gives zeros, tensor_content of
// exactly the shape's bytes; and back, as TF Serving answers (typed fields).
#include <doctest/doctest.h>

#include <cstring>

#include "export/grpc/tensor_proto.h"

namespace {

using namespace est;

tensorflow::TensorProto proto_of(tensorflow::DataType dtype, std::vector<int64_t> shape) {
  tensorflow::TensorProto proto;
  proto.set_dtype(dtype);
  for (int64_t dim : shape) proto.mutable_tensor_shape()->add_dim()->set_size(dim);
  return proto;
}

std::string message_of(const tensorflow::TensorProto& proto) {
  try {
    serving::tensor_from_proto(proto, "x");
  } catch (const InvalidArgumentError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("TensorProto: typed fields of each dtype, repeated last values, zeros, and back") {
  auto floats = proto_of(tensorflow::DT_FLOAT, {2, 2});
  floats.add_float_val(1.5f);
  floats.add_float_val(-2);
  Tensor t = serving::tensor_from_proto(floats, "x");
  CHECK(t.shape() == Shape{2, 2});
  CHECK(t.to_vector<float>() == std::vector<float>{1.5f, -2, -2, -2});  // the last repeated
  CHECK(serving::tensor_from_proto(proto_of(tensorflow::DT_INT64, {3}), "x").to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0});  // no values: zeros
  auto strings = proto_of(tensorflow::DT_STRING, {2});
  strings.add_string_val("a");
  strings.add_string_val(std::string("\0b", 2));
  CHECK(serving::tensor_from_proto(strings, "x").to_vector<std::string>() ==
        std::vector<std::string>{"a", std::string("\0b", 2)});
  auto bytes = proto_of(tensorflow::DT_UINT8, {2});
  bytes.add_int_val(7);
  bytes.add_int_val(255);
  CHECK(serving::tensor_from_proto(bytes, "x").to_vector<int64_t>() ==
        std::vector<int64_t>{7, 255});
  for (tensorflow::DataType dtype :
       {tensorflow::DT_FLOAT, tensorflow::DT_DOUBLE, tensorflow::DT_INT32, tensorflow::DT_INT64,
        tensorflow::DT_UINT8, tensorflow::DT_BOOL, tensorflow::DT_BFLOAT16,
        tensorflow::DT_STRING}) {
    INFO(tensorflow::DataType_Name(dtype));
    tensorflow::TensorProto answer;
    const DType est_dtype = serving::dtype_from_tf(dtype);
    serving::tensor_to_proto(est_dtype == DType::kString ? Tensor::empty({2, 1}, est_dtype)
                                                         : Tensor::zeros({2, 1}, est_dtype),
                             answer);
    CHECK(answer.dtype() == dtype);
    CHECK(answer.tensor_shape().dim_size() == 2);
    CHECK(answer.tensor_content().empty());
    // Back again: the same tensor.
    CHECK(serving::tensor_from_proto(answer, "x").shape() == Shape{2, 1});
  }
  tensorflow::TensorProto answer;
  serving::tensor_to_proto(Tensor::from_vector(std::vector<float>{0.25f, 3}), answer);
  CHECK(std::vector<float>(answer.float_val().begin(), answer.float_val().end()) ==
        std::vector<float>{0.25f, 3});
}

TEST_CASE("TensorProto: tensor_content of the shape's bytes, and the refusals") {
  auto content = proto_of(tensorflow::DT_FLOAT, {2});
  const float values[2] = {4, -1};
  content.set_tensor_content(std::string(reinterpret_cast<const char*>(values), sizeof values));
  CHECK(serving::tensor_from_proto(content, "x").to_vector<float>() == std::vector<float>{4, -1});
  content.mutable_tensor_shape()->mutable_dim(0)->set_size(3);
  CHECK(message_of(content) ==
        "tensor parsing error: x: tensor_content has 8 bytes; shape [3] of DT_FLOAT needs 12 (3 "
        "elements of 4 bytes)");
  auto unknown = proto_of(tensorflow::DT_FLOAT, {-1, 2});
  CHECK(message_of(unknown).find("dimension 0 is -1") != std::string::npos);
  auto overflow = proto_of(tensorflow::DT_FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  CHECK(message_of(overflow).find("overflows int64") != std::string::npos);
  auto complex = proto_of(tensorflow::DT_COMPLEX64, {1});
  CHECK(message_of(complex).find("DataType DT_COMPLEX64 is not one est-serve runs") !=
        std::string::npos);
  auto strings = proto_of(tensorflow::DT_STRING, {1});
  strings.set_tensor_content("abc");
  CHECK(message_of(strings).find("string_val, not tensor_content") != std::string::npos);
}
