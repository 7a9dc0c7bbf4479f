// ModeKeys: which of the three programs a model_fn call belongs to (tf.estimator.ModeKeys).
//
// The Estimator passes one of these to model_fn and input_fn and maps it onto nn::Mode for the
// ModelContext (layers such as dropout and batch norm ask the context, not the key).
#pragma once

#include <cstdint>
#include <string_view>

#include "nn/model_context.h"

namespace est {

enum class ModeKeys : uint8_t { kTrain, kEval, kPredict };

// "train", "eval", "infer": TensorFlow's string values, used in log lines and messages.
constexpr std::string_view mode_name(ModeKeys mode) {
  switch (mode) {
    case ModeKeys::kTrain:
      return "train";
    case ModeKeys::kEval:
      return "eval";
    case ModeKeys::kPredict:
      return "infer";
  }
  return "unknown";
}

constexpr nn::Mode to_nn_mode(ModeKeys mode) {
  switch (mode) {
    case ModeKeys::kTrain:
      return nn::Mode::kTrain;
    case ModeKeys::kEval:
      return nn::Mode::kEval;
    case ModeKeys::kPredict:
      return nn::Mode::kPredict;
  }
  return nn::Mode::kTrain;
}

}  // namespace est
