// Session: the training bundle and variable lookups that hooks use.
#include "estimator/hooks/session_run_hook.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est {

checkpoint::TensorBundle Session::checkpoint_bundle() const {
  if (!bundle_)
    throw FailedPreconditionError(fmt::format(
        "Session::checkpoint_bundle: only a training session saves checkpoints (mode {})",
        mode_name(mode_)));
  return bundle_();
}

Tensor Session::fetch_variable(const std::string& name) const {
  if (name == "global_step") return Tensor::scalar(static_cast<double>(global_step()), DType::kI64);
  if (auto variable = store_->find(name)) return variable->value;
  throw NotFoundError(
      fmt::format("no variable '{}' in the session's store ({} variables)", name, store_->size()));
}

}  // namespace est
