// The JSON forms of TF Serving's REST API that are not tensors: base64 values ({"b64": ...})
// and the classify/regress requests' "examples" (with their optional "context"), turned into
// serialized tf.Examples as TF Serving's json_tensor.cc does: a JSON string or b64 object is a
// bytes_list value, a whole number (or true/false) an int64_list value, a decimal number a
// float_list value; a list is the feature's values, which must be of one kind. Context
// features are merged into every example (an example's own feature wins, as protobuf's merge
// of the two does in TF Serving).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace est::serving {

// RFC 4648 base64 (padding optional, no whitespace); InvalidArgumentError when malformed.
std::string base64_decode(std::string_view text);

// True for {"b64": "<string>"} and nothing else (TF's IsValBase64Object).
bool is_base64_object(const nlohmann::json& value);

// The serialized tf.Examples of a classify/regress request body (an object with "examples" and
// optionally "context"); InvalidArgumentError naming the example and feature when malformed.
std::vector<std::string> examples_from_json(const nlohmann::json& request);

}  // namespace est::serving
