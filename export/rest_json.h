// The tensors of TF Serving's REST API in JSON (tensorflow_serving/util/json_tensor.h's
// formats), for rest_api.cpp and rest_classify.cpp: a tensor is nested JSON lists of its
// values, DT_STRING values are JSON strings or {"b64": "..."}, booleans true/false; a request
// gives a whole tensor (columnar "inputs") or one row per instance ("instances"), and an answer
// gives a whole tensor or one row of it. float32 values are written as the float they are, not
// as the double they widen to (0.1f is 0.1, not 0.10000000149011612).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/onnx_model.h"

namespace est::serving {

// Columnar: the whole tensor of input `input`, of `info`'s dtype and shape (InvalidArgumentError
// naming the input for ragged lists, a value of the wrong kind or the wrong shape).
Tensor tensor_from_json(const std::string& input, const TensorInfo& info,
                        const nlohmann::json& value);
// Row format: one value per instance, stacked along a new first axis (errors as above).
Tensor tensor_from_rows(const std::string& input, const TensorInfo& info,
                        const std::vector<const nlohmann::json*>& rows);

// `tensor` as JSON.
nlohmann::json json_of(const Tensor& tensor);
// Each row of `tensor` (its first axis) as JSON: the answer of the row format. The tensor is
// read once for all the rows.
std::vector<nlohmann::json> json_rows(const Tensor& tensor);

// The graph output `info` names among `outputs` (InternalError when the model lacks it).
const Tensor& output_of(const NamedTensors& outputs, const TensorInfo& info);

}  // namespace est::serving
