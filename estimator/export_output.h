// TF's export outputs (tf.estimator.export.PredictOutput, ClassificationOutput,
// RegressionOutput): what one serving signature of an export answers, and with which method.
// Followed: tensorflow/python/saved_model/model_utils/export_output.py.
//
// An EstimatorSpec's export_outputs maps a signature name to one of them. A bare Tensor is a
// PredictOutput of that one tensor under TF's key "output", so that `{{"probabilities", p}}`
// reads as it does in TF. Classification and regression signatures take serialized
// tf.Examples (TF's "inputs" key), so the export writes them only for a parsing serving input
// receiver (build_parsing_serving_input_receiver_fn), and skips them with a warning otherwise,
// as TF does. Classes may be integer class ids: est has no string ops, so est-serve writes them
// as their decimal strings, which is what TF's heads' as_string of the class ids gives.
#pragma once

#include <map>
#include <string>

#include "ops/tensor.h"

namespace est {

struct PredictOutput {
  std::map<std::string, Tensor> outputs;  // key -> [batch, ...]
};

struct ClassificationOutput {
  Tensor scores;   // float [batch, classes], or undefined
  Tensor classes;  // [batch, classes] class ids (or labels), or undefined; not both undefined
};

struct RegressionOutput {
  Tensor value;  // float [batch] or [batch, 1]
};

// One of the three; the method name is TF's (tensorflow/serving/predict, classify, regress).
class ExportOutput {
 public:
  enum class Method { kPredict, kClassify, kRegress };

  ExportOutput(Tensor output) : ExportOutput(PredictOutput{{{"output", std::move(output)}}}) {}
  ExportOutput(PredictOutput output)
      : method_(Method::kPredict), outputs_(std::move(output.outputs)) {}
  ExportOutput(ClassificationOutput output);
  ExportOutput(RegressionOutput output);

  Method method() const { return method_; }
  const char* method_name() const;  // "tensorflow/serving/predict" ...
  // The signature's outputs by TF's keys: PredictOutput's own keys; "classes" and "scores"
  // (those defined); "outputs" for a regression.
  const std::map<std::string, Tensor>& outputs() const { return outputs_; }

 private:
  Method method_;
  std::map<std::string, Tensor> outputs_;
};

}  // namespace est
