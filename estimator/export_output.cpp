// The export outputs' checks, as TF's export_output.py makes them when they are built.
#include "estimator/export_output.h"

#include "ops/error.h"

namespace est {

ExportOutput::ExportOutput(ClassificationOutput output) : method_(Method::kClassify) {
  if (!output.scores.defined() && !output.classes.defined())
    throw InvalidArgumentError(
        "ClassificationOutput: at least one of scores and classes must be set");
  if (output.scores.defined() && !is_floating(output.scores.dtype()))
    throw InvalidArgumentError(
        std::string("ClassificationOutput: scores must be a float tensor, got ") +
        std::string(dtype_name(output.scores.dtype())));
  if (output.classes.defined() && is_floating(output.classes.dtype()))
    throw InvalidArgumentError(
        "ClassificationOutput: classes must be class ids (an integer tensor) or labels, got a "
        "float tensor");
  if (output.scores.defined()) outputs_["scores"] = std::move(output.scores);
  if (output.classes.defined()) outputs_["classes"] = std::move(output.classes);
}

ExportOutput::ExportOutput(RegressionOutput output) : method_(Method::kRegress) {
  if (!output.value.defined() || !is_floating(output.value.dtype()))
    throw InvalidArgumentError("RegressionOutput: value must be a float tensor");
  outputs_["outputs"] = std::move(output.value);
}

const char* ExportOutput::method_name() const {
  switch (method_) {
    case Method::kPredict:
      return "tensorflow/serving/predict";
    case Method::kClassify:
      return "tensorflow/serving/classify";
    case Method::kRegress:
      return "tensorflow/serving/regress";
  }
  return "";
}

}  // namespace est
