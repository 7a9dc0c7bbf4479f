// The ONNX model of a traced function (trace.h): opset 13, IR version 8, the constants the
// outputs depend on as initializers, a dynamic batch dimension.
//
// The function is traced twice, at two batch sizes with different input values; the dimensions
// that differ between the two traces are the dynamic ones (a reshape to [-1, 3136], a graph
// input's "batch" dimension), and a constant that differs is batch- or data-dependent, which
// ONNX cannot express as an initializer: the export refuses it. TensorFlow's layouts are kept
// at the graph's edges (NHWC activations, HWIO kernels); around Conv, MaxPool and AveragePool,
// which are NCHW in ONNX, the graph transposes. What the export cannot express (a kernel with
// no ONNX form here, a reshape with two batch-dependent dimensions) is an UnimplementedError
// naming the op, never a wrong graph; ops the outputs do not depend on are dropped.
//
// Lookup tables (feature_column/lookup.h) are in the graph where ONNX can express them
// (LabelEncoder, int64 arithmetic, a Gather of strings) and otherwise pre-processing steps
// (export/lookup_step.h) feeding graph inputs "<column>/ids": onnx_lookup.h says which and why.
#pragma once

#include <string>

#include "export/lookup_step.h"
#include "export/trace.h"

namespace est::serving {

inline constexpr int kOnnxOpsetVersion = 13;
inline constexpr int kOnnxIrVersion = 8;
inline constexpr const char* kOnnxMlDomain = "ai.onnx.ml";  // LabelEncoder
inline constexpr int kOnnxMlOpsetVersion = 2;

// The serialized ModelProto of `trace`, whose dynamic dimensions and constants are checked
// against `other` (the same function traced at another batch size). `graph_name` names the
// graph ("serving_default"). The lookup steps the graph needs are appended to `lookups`; when
// it is null, a graph that needs one is an UnimplementedError naming the column.
std::string to_onnx(const Trace& trace, const Trace& other, const std::string& graph_name,
                    std::vector<LookupStep>* lookups = nullptr);

// A serialized ModelProto in protobuf's text format (export_saved_model's as_text).
std::string onnx_text(const std::string& serialized_model);

// The ONNX TensorProto.DataType of an est dtype.
int onnx_dtype(DType dtype);

}  // namespace est::serving
