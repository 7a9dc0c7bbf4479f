// The REST API's JSON without a server (export/rest_json.h, export/rest_json_text.h): the row
// format's answer read from each output once for all its rows, and the JSON text as TF
// Serving's util/json_tensor.cc reads and writes it (NaN and infinities both ways, nesting
// bounded before anything recurses, a client's text echoed without control characters).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "export/rest_json.h"
#include "export/rest_json_text.h"
#include "ops/error.h"

namespace {

using namespace est;
using namespace est::serving;
using nlohmann::json;

}  // namespace

TEST_CASE("rest_json: json_rows gives every row of a tensor, as json_of gives the whole") {
  // 4000 rows of [2, 3]: row r holds r * 6 + i at its i-th place.
  constexpr int64_t kRows = 4000;
  std::vector<float> values(kRows * 6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  const Tensor tensor = Tensor::from_vector(values, {kRows, 2, 3});
  const std::vector<json> rows = json_rows(tensor);
  REQUIRE(rows.size() == kRows);
  const json whole = json_of(tensor);
  for (int64_t r = 0; r < kRows; ++r) {
    CAPTURE(r);
    REQUIRE(rows[r] == whole[r]);
    CHECK(rows[r][1][2].get<double>() == static_cast<double>(r * 6 + 5) + 0.5);
  }
  // Strings and integers too, and a [batch] output gives scalars.
  CHECK(json_rows(Tensor::from_vector(std::vector<int64_t>{7, 8, 9})) ==
        std::vector<json>{7, 8, 9});
  CHECK(json_rows(Tensor::scalar(1.0)).empty());
}

TEST_CASE("rest_json_text: NaN, Infinity and -Infinity are read as json_tensor.cc reads them") {
  const json request = parse_request_json(
      R"({"instances": [NaN, Infinity, -Infinity, Inf, -Inf, -NaN, 1.5, "NaN", 0e-999999901]})");
  const json& values = request["instances"];
  CHECK(std::isnan(values[0].get<double>()));
  CHECK(values[1].get<double>() == std::numeric_limits<double>::infinity());
  CHECK(values[2].get<double>() == -std::numeric_limits<double>::infinity());
  CHECK(values[3].get<double>() == std::numeric_limits<double>::infinity());
  CHECK(values[4].get<double>() == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(values[5].get<double>()));
  CHECK(values[6].get<double>() == 1.5);
  CHECK(values[7] == "NaN");  // a string stays a string
  // The number tokens NaN and the infinities are read through keep their value (0) when a
  // client sends them.
  CHECK(values[8].get<double>() == 0.0);
  // Nothing else changes: other bare words are still errors.
  CHECK_THROWS_AS(parse_request_json(R"({"instances": [nan]})"), InvalidArgumentError);
  CHECK_THROWS_AS(parse_request_json(R"({"instances": [Infinit]})"), InvalidArgumentError);
}

TEST_CASE("rest_json_text: non-finite answers are written NaN, Infinity and -Infinity") {
  const Tensor outputs =
      Tensor::from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN(),
                                             std::numeric_limits<float>::infinity(),
                                             -std::numeric_limits<float>::infinity(), 0.1f},
                          {2, 2});
  CHECK(answer_text({{"outputs", json_of(outputs)}}) ==
        R"({"outputs":[[NaN,Infinity],[-Infinity,0.1]]})");
  CHECK(answer_text({{"predictions", json_rows(outputs)}, {"name \"q\"", "a\nb"}}) ==
        R"({"name \"q\"":"a\nb","predictions":[[NaN,Infinity],[-Infinity,0.1]]})");
  // What it writes, it reads back.
  const json read = parse_request_json(answer_text({{"v", json_of(outputs)}}));
  CHECK(std::isnan(read["v"][0][0].get<double>()));
  CHECK(read["v"][1][0].get<double>() == -std::numeric_limits<double>::infinity());
}

TEST_CASE("rest_json_text: nesting deeper than kMaxJsonDepth is refused before parsing") {
  const std::string deep =
      R"({"instances": )" + std::string(100000, '[') + "1.0" + std::string(100000, ']') + "}";
  try {
    parse_request_json(deep);
    FAIL("a body nested 100000 deep was parsed");
  } catch (const InvalidArgumentError& error) {
    CHECK(std::string(error.what()).find("nested more than 260 deep at offset 273") !=
          std::string::npos);
  }
  // Brackets in strings do not count; the deepest allowed nesting parses.
  CHECK(parse_request_json(R"({"a": ")" + std::string(1000, '[') + R"("})")["a"]
            .get<std::string>()
            .size() == 1000);
  const std::string deepest = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK(parse_request_json(deepest).is_array());
}

TEST_CASE("rest_json_text: printable writes control characters as \\xNN") {
  CHECK(printable(std::string("half\0plus\n\x7f", 11)) == "half\\x00plus\\x0a\\x7f");
  CHECK(printable("caf\xc3\xa9 /v1") == "caf\xc3\xa9 /v1");
}
