// fit and evaluate on tensors, as Keras takes NumPy arrays (Keras 2.x keras/engine/data_adapter.py:
// TensorLikeDataAdapter, train_validation_split; keras/engine/training.py, fit's validation_split
// and shuffle): the rows become a dataset of batch_size batches (the last one partial), and
// validation_split holds out the LAST fraction of the rows, taken before any shuffling
// (split_at = int(N * (1 - validation_split))), as Keras does; the training rows are shuffled
// afresh every epoch when `shuffle` (seeded by config().tf_random_seed when set).
// validation_split on a dataset is an error, as in Keras.
#include <fmt/format.h>

#include "keras/model.h"
#include "ops/array_ops.h"
#include "ops/error.h"

namespace est::keras {
namespace {

Tensor rows(const Tensor& x, int64_t begin, int64_t count) {
  std::vector<int64_t> start(static_cast<size_t>(x.rank()), 0);
  std::vector<int64_t> size(x.shape().begin(), x.shape().end());
  start[0] = begin;
  size[0] = count;
  return ops::slice(x, start, size);
}

data::Dataset slices(const Tensor& x, const Tensor& y) {
  return data::Dataset::from_tensor_slices(data::Features{{"x", x}}, y);
}

void check_rows(const Tensor& x, const Tensor& y, const char* what) {
  if (!x.defined() || !y.defined() || x.rank() < 1 || y.rank() < 1 || x.dim(0) != y.dim(0))
    throw InvalidArgumentError(fmt::format(
        "{}: x and y must be tensors with the same number of rows (first dimension); got x {} "
        "and y {}",
        what, x.defined() ? ops::shape_str(x.shape()) : "undefined",
        y.defined() ? ops::shape_str(y.shape()) : "undefined"));
}

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  check_rows(x, y, "fit");
  if (options.batch_size < 1)
    throw InvalidArgumentError(
        fmt::format("fit: batch_size must be >= 1, got {}", options.batch_size));
  if (!(options.validation_split >= 0.0 && options.validation_split < 1.0))
    throw InvalidArgumentError(
        fmt::format("fit: validation_split must be in [0, 1), got {}", options.validation_split));
  int64_t n = x.dim(0);
  auto split_at = static_cast<int64_t>(static_cast<double>(n) * (1.0 - options.validation_split));
  if (options.validation_split > 0) {
    if (options.validation_data)
      throw InvalidArgumentError(
          "fit: pass validation_split or validation_data, not both (validation_data wins in "
          "Keras; est asks you to choose)");
    if (split_at == 0 || split_at == n)
      throw InvalidArgumentError(fmt::format(
          "fit: validation_split {} of {} rows leaves {} training and {} validation rows; both "
          "need at least one",
          options.validation_split, n, split_at, n - split_at));
    options.validation_data =
        slices(rows(x, split_at, n - split_at), rows(y, split_at, n - split_at))
            .batch(options.batch_size);
  }
  data::Dataset train = slices(rows(x, 0, split_at), rows(y, 0, split_at));
  if (options.shuffle) {
    std::optional<uint64_t> seed;
    if (config().tf_random_seed) seed = *config().tf_random_seed;
    train = train.shuffle(split_at, seed, /*reshuffle_each_iteration=*/true);
  }
  options.validation_split = 0;
  return fit(train.batch(options.batch_size), std::move(options));
}

std::map<std::string, double> Model::evaluate(const Tensor& x, const Tensor& y,
                                              EvaluateOptions options, int64_t batch_size) {
  check_rows(x, y, "evaluate");
  if (batch_size < 1)
    throw InvalidArgumentError(
        fmt::format("evaluate: batch_size must be >= 1, got {}", batch_size));
  return evaluate(slices(x, y).batch(batch_size), std::move(options));
}

}  // namespace est::keras
