// OnnxModel: an exported model.onnx loaded back and run with est's own kernels, for est-serve
// (and any program that predicts without model_fn).
//
// The interpreter knows the ONNX ops the exporter writes (onnx_export.h), with the attributes
// it writes; load() refuses any other op, or an attribute value the est kernels cannot honour
// (a grouped Conv, padding that is neither TF's `same` nor `valid`), with an UnimplementedError
// naming it, so a model that loads runs. Conv and pooling come back from ONNX's NCHW to est's
// NHWC kernels by transposes, held lazily so that those that cancel cost no copy
// (onnx_layout.h). load() plans the graph once; run() is const and may be called from several
// threads at once (each run keeps its values to itself; a small request runs its kernels on the
// calling thread alone, onnx_model.cpp says why).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "export/trace.h"

namespace est::serving {

// A graph input or output: its name, dtype and shape (-1 for a dynamic dimension).
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

class OnnxModel {
 public:
  // NotFoundError when the file is missing; DataLossError when it is not an ONNX model;
  // UnimplementedError for an op or attribute est does not run.
  static OnnxModel load(const std::string& path);

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;

  // Every graph output for `inputs` (each graph input by name, of its dtype, rank and static
  // dimensions: InvalidArgumentError naming the input otherwise).
  NamedTensors run(const NamedTensors& inputs) const;

  // The est dtype of an ONNX TensorProto.DataType (UnimplementedError for others).
  static DType dtype_of(int onnx_dtype);

  struct Graph;

 private:
  explicit OnnxModel(std::shared_ptr<const Graph> graph) : graph_(std::move(graph)) {}
  std::shared_ptr<const Graph> graph_;
};

}  // namespace est::serving
