// Estimator::predict: the loop over a PredictionSession, handing out one map per example (each
// selected prediction split along its first dimension), or per batch without
// yield_single_examples, as TF's predict yields them (estimator.py).
#include "data/element.h"
#include "estimator/estimator.h"
#include "estimator/prediction_session.h"
#include "ops/error.h"

namespace est {

void Estimator::predict(const InputFn& input_fn, const std::function<bool(Predictions)>& consume,
                        const PredictOptions& options) {
  if (!consume) throw InvalidArgumentError("predict: the consumer function is empty");
  detail::check_hooks(options.hooks, "predict");
  detail::PredictionSession session({.model = {model_fn_, input_fn, &config_, seed_, &params_},
                                     .predict_keys = options.predict_keys,
                                     .checkpoint_path = options.checkpoint_path,
                                     .hooks = options.hooks});
  bool consuming = true;
  while (consuming && !session.should_stop()) {
    detail::BatchPredictions batch = session.run(session.next_batch());
    if (batch.empty()) continue;  // the input's end
    if (!options.yield_single_examples) {
      consuming = consume(Predictions(batch.begin(), batch.end()));
      continue;
    }
    int64_t rows = batch.front().second.dim(0);
    for (int64_t row = 0; row < rows && consuming; ++row) {
      Predictions example;
      for (const auto& [name, tensor] : batch) example[name] = data::slice_row(tensor, row);
      consuming = consume(std::move(example));
    }
  }
  session.close();
}

std::vector<Predictions> Estimator::predict(const InputFn& input_fn,
                                            const PredictOptions& options) {
  std::vector<Predictions> all;
  predict(
      input_fn,
      [&](Predictions predictions) {
        all.push_back(std::move(predictions));
        return true;
      },
      options);
  return all;
}

}  // namespace est
