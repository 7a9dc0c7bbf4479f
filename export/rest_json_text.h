// The JSON text of TF Serving's REST API, as its util/json_tensor.cc reads and writes it (the
// parsed values are rest_json.h's):
//   reading  a request body of any nesting the parser can hold without recursing: lists and
//            objects nested deeper than kMaxJsonDepth are refused before parsing (a tensor has
//            at most 254 dimensions); NaN, Infinity and -Infinity (and rapidjson's Inf, -Inf,
//            -NaN) are numbers, as rapidjson's kParseNanAndInfFlag reads them;
//   writing  an answer with non-finite numbers as NaN, Infinity and -Infinity (json_tensor.cc's
//            WriteDecimal), not as null.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace est::serving {

// TF's TensorShape holds at most 254 dimensions; a request adds its object, "instances" and an
// instance object around them.
inline constexpr int kMaxJsonDepth = 260;

// The JSON value of `body` (InvalidArgumentError "JSON Parse error: ..." naming the offset when
// it is not JSON or nests deeper than kMaxJsonDepth).
nlohmann::json parse_request_json(const std::string& body);

// `value` as JSON text, non-finite floats written as TF Serving writes them.
std::string answer_text(const nlohmann::json& value);

// `text` with its control characters written as \xNN, for echoing a client's text in a message.
std::string printable(const std::string& text);

}  // namespace est::serving
