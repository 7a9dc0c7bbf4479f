// The fast reading of a REST :predict body of plain numbers: one pass over the text, each number
// read with std::from_chars into one flat buffer, no JSON DOM. It reads only the common case,
// {"signature_name"?: "...", "instances" or "inputs": a rectangular nested list of JSON numbers},
// and gives up (nullopt) on anything else: strings, b64 objects, named inputs, NaN and the
// infinities, an empty or ragged list, nesting deeper than kMaxJsonDepth, a repeated or unknown
// key, an escape in a string, any syntax error. The caller then reads the body with the DOM
// path (rest_json_text.h), so every error message and every other format stays as it was.
// Values are those the DOM path reads: an integer token that fits int64 (or uint64) is that
// integer converted to double (so -0 is +0), any other number is its correctly rounded double.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::serving {

struct NumericRequest {
  std::optional<std::string> signature_name;
  bool rows = false;           // "instances" (the row format) rather than "inputs"
  Shape shape;                 // of the nested lists ([] for a bare number)
  std::vector<double> values;  // row-major
};

// The request of `body` when it is the common case above, else nullopt.
std::optional<NumericRequest> read_numeric_request(std::string_view body);

}  // namespace est::serving
