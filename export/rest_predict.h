// TF Serving's REST :predict on one servable (g3doc/api_rest.md, "Predict API"; the routing is
// rest_api.cpp's). A body of plain numbers for a signature of one float input is read by
// rest_numbers.h straight into the input's buffer; every other body (and any body the fast
// reading gives up on) goes through the JSON DOM, whose errors are the API's. Either way the
// answer is written by rest_json_writer.h without a DOM: {"predictions": [...]} for the row
// format, {"outputs": ...} for the columnar one, a single output without its name.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "export/batcher.h"
#include "export/servable.h"

namespace est::serving {

// The answer text of a :predict request `body` on `servable` (errors: rest_api.h's).
std::string predict_text(const Servable& servable, const std::string& body, Batcher* batcher);

// The request's JSON object (InvalidArgumentError when the body is not JSON or not an object).
nlohmann::json parse_body(const std::string& body);

// The signature a request names ("signature_name", a string), or serving_default;
// InvalidArgumentError as TF Serving words it when there is no such signature.
const SignatureDef& find_signature(const Servable& servable, const nlohmann::json& request,
                                   std::string& signature_name);

}  // namespace est::serving
