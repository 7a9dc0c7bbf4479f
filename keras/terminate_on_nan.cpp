// keras.callbacks.TerminateOnNaN (Keras 2.x); see terminate_on_nan.h.
#include "keras/terminate_on_nan.h"

#include <fmt/format.h>

#include <cmath>

#include "keras/model.h"

namespace est::keras {

TerminateOnNaN::TerminateOnNaN(std::optional<ProgbarOutput> output)
    : output_(output.value_or(stdout_output())) {}

void TerminateOnNaN::on_train_batch_end(int64_t batch, const Logs& logs) {
  auto loss = logs.find("loss");
  if (loss == logs.end() || std::isfinite(loss->second)) return;
  output_.write(fmt::format("Batch {}: Invalid loss, terminating training\n", batch));
  if (model() != nullptr) model()->stop_training = true;
}

}  // namespace est::keras
