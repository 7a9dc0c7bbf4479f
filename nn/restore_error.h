// RestoreMismatchError: a value restored from a checkpoint does not fit the variable the model
// creates (another shape or dtype). It is an InvalidArgumentError, typed so that a caller that
// knows which checkpoint it restored (the Estimator's training session) can name the file
// without reading the message.
#pragma once

#include <string>

#include "ops/error.h"

namespace est::nn {

class RestoreMismatchError : public InvalidArgumentError {
 public:
  explicit RestoreMismatchError(const std::string& message) : InvalidArgumentError(message) {}
};

}  // namespace est::nn
