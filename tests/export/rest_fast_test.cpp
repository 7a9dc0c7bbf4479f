// The REST predict path without a DOM: rest_json_writer.h writes the bytes answer_text(json_of())
// writes (every float32 class, random float32 and float64 bit patterns, NaN and the
// infinities, integers, booleans, strings), rest_numbers.h reads the values nlohmann's parser
// reads and gives up on everything else, and handle_rest answers a body of plain numbers
// byte for byte as it answers the same request through the DOM, keeping its errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "export/rest_api.h"
#include "export/rest_json.h"
#include "export/rest_json_text.h"
#include "export/rest_json_writer.h"
#include "export/rest_numbers.h"
#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::serving;
using nlohmann::json;

std::string written(const Tensor& tensor) {
  std::string out;
  TensorWriter(tensor).write(out);
  return out;
}

// The writer against the DOM, whole and row by row.
void check_writer(const Tensor& tensor) {
  REQUIRE(written(tensor) == answer_text(json_of(tensor)));
  const std::vector<json> rows = json_rows(tensor);
  const TensorWriter writer(tensor);
  REQUIRE(writer.rows() == static_cast<int64_t>(rows.size()));
  for (size_t row = 0; row < rows.size(); ++row) {
    std::string out;
    writer.write_row(out, static_cast<int64_t>(row));
    REQUIRE(out == answer_text(rows[row]));
  }
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("rest_json_writer: the DOM's bytes for every kind of value") {
  std::mt19937 random(7);
  std::vector<float> floats = {0.0f,
                               -0.0f,
                               0.1f,
                               1.0f,
                               100.0f,
                               1e-5f,
                               1e-7f,
                               1e20f,
                               123456789.0f,
                               -2.5f,
                               3.4028235e38f,
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 200000; ++i) {  // random bit patterns: every exponent, NaNs included
    const uint32_t bits = random();
    float value;
    std::memcpy(&value, &bits, sizeof value);
    floats.push_back(value);
  }
  for (int i = 0; i < 20000; ++i)  // and values a model gives
    floats.push_back(std::uniform_real_distribution<float>(-10, 10)(random));
  check_writer(Tensor::from_vector(floats));
  check_writer(Tensor::from_vector(std::vector<float>(floats.begin(), floats.begin() + 24000),
                                   {1000, 2, 3, 4}));
  std::vector<double> doubles = {
      0.0,    -0.0,    0.1,          1e300,
      5e-324, -5e-324, std::nan(""), -std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 50000; ++i) {
    const uint64_t bits = (uint64_t{random()} << 32) | random();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    doubles.push_back(value);
  }
  check_writer(Tensor::from_vector(doubles, {25004, 2}));
  check_writer(Tensor::from_vector(std::vector<int64_t>{0, -1, std::numeric_limits<int64_t>::min(),
                                                        std::numeric_limits<int64_t>::max()},
                                   {2, 2}));
  check_writer(Tensor::from_vector(std::vector<int32_t>{7, -8, 9}));
  check_writer(
      ops::cast(Tensor::from_vector(std::vector<float>{1, 0, 1, 1}, {2, 2}), DType::kBool));
  check_writer(ops::cast(Tensor::from_vector(floats), DType::kBF16));
  check_writer(data::string_tensor({"a\"b", "\n\x01", "caf\xc3\xa9", ""}, {2, 2}));
  check_writer(Tensor::scalar(0.1));
  check_writer(Tensor::from_vector(std::vector<float>{}, {0, 3}));
}

TEST_CASE("rest_numbers: the values, shape and format nlohmann's parser reads") {
  std::vector<std::string> tokens = {"0",
                                     "-0",
                                     "1",
                                     "-1",
                                     "1.5",
                                     "-0.0",
                                     "1e5",
                                     "1E-5",
                                     "2e+3",
                                     "0.1",
                                     "123456789012345678901234",
                                     "9223372036854775807",
                                     "9223372036854775808",
                                     "-9223372036854775808",
                                     "-9223372036854775809",
                                     "18446744073709551615",
                                     "18446744073709551616",
                                     "3.4028234663852886e38",
                                     "1e-320",
                                     "0e-999999901",
                                     "4.9e-324",
                                     "1.7976931348623157e308"};
  std::mt19937 random(11);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t bits = (uint64_t{random()} << 32) | random();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value)) tokens.push_back(fmt::format("{}", value));
    tokens.push_back(fmt::format("{}", static_cast<float>(value)));
    tokens.push_back(std::to_string(static_cast<int64_t>(bits) >> (bits % 64)));
  }
  std::string list;
  for (const std::string& token : tokens)
    if (token.find_first_of("in") == std::string::npos)  // inf and nan are not JSON
      list += (list.empty() ? "" : ", ") + token;
  const std::string body = "{ \"signature_name\" : \"s\",\n\t\"instances\": [" + list + "] }";
  const std::optional<NumericRequest> read = read_numeric_request(body);
  REQUIRE(read.has_value());
  const json dom = parse_request_json(body)["instances"];
  CHECK(read->rows);
  CHECK(read->signature_name == "s");
  REQUIRE(read->shape == Shape{static_cast<int64_t>(dom.size())});
  for (size_t i = 0; i < dom.size(); ++i) {
    CAPTURE(dom[i].dump());
    REQUIRE(same_bits(read->values[i], dom[i].get<double>()));
  }
  const auto columnar = read_numeric_request(R"({"inputs": [[[1], [2]], [[3], [4]], [[5], [6]]]})");
  REQUIRE(columnar.has_value());
  CHECK_FALSE(columnar->rows);
  CHECK(columnar->shape == Shape{3, 2, 1});
  CHECK(columnar->values == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(read_numeric_request(R"({"inputs": 2.5})")->shape.empty());
}

TEST_CASE("rest_numbers: anything but plain numbers is left to the DOM path") {
  const std::string deep = std::string(200000, '[');
  for (const std::string& body :
       std::vector<std::string>{R"({"instances": ["a"]})",
                                R"({"instances": [{"b64": "AA=="}]})",
                                R"({"instances": [{"x": 1}]})",
                                R"({"instances": [NaN]})",
                                R"({"instances": [[1], [1, 2]]})",
                                R"({"instances": [[1], 2]})",
                                R"({"instances": [1, [2]]})",
                                R"({"instances": []})",
                                R"({"instances": [[]]})",
                                R"({"instances": 5})",
                                R"({"instances": [1], "instances": [1]})",
                                R"({"instances": [1], "inputs": [1]})",
                                R"({"instances": [1], "other": 1})",
                                R"({"signature_name": "a\u0062", "instances": [1]})",
                                R"({"signature_name": 1, "inputs": 1})",
                                R"({"instances": [1]} x)",
                                R"({"instances": [01]})",
                                R"({"instances": [+1]})",
                                R"({"instances": [.5]})",
                                R"({"instances": [1.]})",
                                R"({"instances": [1e]})",
                                R"({"instances": [1e400]})",
                                R"({"instances": [1,]})",
                                R"({"signature_name": "s"})",
                                R"([1])",
                                "",
                                R"({"instances": [1])",
                                "{\"instances\": " + deep,
                                "{\"inputs\": " + deep + "1"})
    CHECK_FALSE(read_numeric_request(body).has_value());
}

TEST_CASE("est-serve predict: a body of plain numbers is answered as the DOM answers it") {
  testing::ScratchDir dir;
  const std::string base = dir / "half_plus_two";
  testing::serve::export_half_plus_two(dir / "model", base);
  ModelManager model("half_plus_two", base);
  model.poll();
  const std::string path = "/v1/models/half_plus_two:predict";
  const std::string values = "1, -0, 0.1, 1e-7, 3.5e38, 123456789012345678, -2.75, 4";
  for (const std::string key : {"instances", "inputs"}) {
    const std::string request = "\"" + key + "\": [" + values + "]}";
    const RestResponse fast = handle_rest(model, "POST", path, "{" + request);
    // An escape in a string is left to the DOM path; the request is the same.
    const RestResponse dom = handle_rest(
        model, "POST", path, R"({"signature_name": "serving\u005fdefault", )" + request);
    INFO(request, ": ", fast.body);
    CHECK(fast.status == 200);
    CHECK(fast.body == dom.body);
  }
  // What the fast path does not take keeps the DOM's errors, and deep nesting does not crash.
  RestResponse wrong = handle_rest(model, "POST", path, R"({"instances": [[1, 2]]})");
  CHECK(wrong.status == 400);
  CHECK(
      wrong.body ==
      R"({"error":"input 'x' must have shape [-1] (-1: any size; the first is the batch), got [1, 2]"})");
  RestResponse deep =
      handle_rest(model, "POST", path, "{\"instances\": " + std::string(200000, '[') + "1");
  CHECK(deep.status == 400);
  CHECK(deep.body.find("nested more than 260 deep") != std::string::npos);
}
