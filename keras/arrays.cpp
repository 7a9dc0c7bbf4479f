// fit and evaluate on tensors, as Keras takes NumPy arrays (Keras 2.x keras/engine/data_adapter.py:
// TensorLikeDataAdapter, train_validation_split; keras/engine/training.py, fit's validation_split
// and shuffle): the rows become a dataset of batch_size batches (the last one partial), and
// validation_split holds out the LAST fraction of the rows, taken before any shuffling
// (split_at = int(N * (1 - validation_split))), as Keras does; the training rows are shuffled
// afresh every epoch when `shuffle` (seeded by config().tf_random_seed when set).
// validation_split on a dataset is an error, as in Keras. Several inputs or outputs: x and y as
// Keras's structures (keras::XStructure, keras::YStructure, data_adapter.h), every tensor sliced
// along its rows alike.
#include <fmt/format.h>

#include <algorithm>

#include "keras/compile_utils.h"
#include "keras/data_adapter.h"
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

// Rows [begin, begin + count) of every tensor of (x, y).
data::Element rows(const data::Element& xy, int64_t begin, int64_t count) {
  data::Element out;
  for (const auto& [name, x] : xy.features) out.features[name] = rows(x, begin, count);
  if (xy.labels.defined()) out.labels = rows(xy.labels, begin, count);
  return out;
}

data::Dataset slices(const data::Element& xy) {
  return data::Dataset::from_tensor_slices(xy.features, xy.labels);
}

// The number of rows every tensor of (x, y) has; InvalidArgumentError naming the shapes otherwise.
int64_t check_rows(const data::Element& xy, const char* what) {
  std::optional<int64_t> n;
  bool same = !xy.features.empty();
  std::string shapes;
  auto visit = [&](const std::string& shown, const Tensor& t) {
    shapes += fmt::format("{}{} {}", shapes.empty() ? "" : ", ", shown,
                          t.defined() ? ops::shape_str(t.shape()) : "undefined");
    if (!t.defined() || t.rank() < 1 || (n && *n != t.dim(0))) same = false;
    if (t.defined() && t.rank() >= 1 && !n) n = t.dim(0);
  };
  // element(x, y)'s one x tensor is "x"; pack_x_y's features are shown as their user wrote them.
  for (const auto& [name, x] : xy.features) visit(name == "x" ? name : structure_name(name), x);
  const bool y_in_features = !std::all_of(xy.features.begin(), xy.features.end(),
                                          [](const auto& f) { return is_x_feature(f.first); });
  if (xy.labels.defined() || !y_in_features) visit("y", xy.labels);
  if (!same)
    throw InvalidArgumentError(fmt::format(
        "{}: x and y must be tensors with the same number of rows (first dimension); got {}", what,
        shapes));
  return *n;
}

// One x tensor and one y tensor as an element (the x feature's name matches a one-input model).
data::Element element(const Tensor& x, const Tensor& y) {
  return data::Element(data::Features{{"x", x}}, y);
}

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  return fit_rows(element(x, y), std::move(options));
}

History Model::fit(XStructure x, YStructure y, FitOptions options) {
  return fit_rows(pack_x_y(std::move(x), std::move(y)), std::move(options));
}

History Model::fit_rows(const data::Element& xy, FitOptions options) {
  const int64_t n = check_rows(xy, "fit");
  if (options.batch_size < 1)
    throw InvalidArgumentError(
        fmt::format("fit: batch_size must be >= 1, got {}", options.batch_size));
  if (!(options.validation_split >= 0.0 && options.validation_split < 1.0))
    throw InvalidArgumentError(
        fmt::format("fit: validation_split must be in [0, 1), got {}", options.validation_split));
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
    options.validation_data = slices(rows(xy, split_at, n - split_at)).batch(options.batch_size);
  }
  data::Dataset train = slices(rows(xy, 0, split_at));
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
  return evaluate_rows(element(x, y), std::move(options), batch_size);
}

std::map<std::string, double> Model::evaluate(XStructure x, YStructure y, EvaluateOptions options,
                                              int64_t batch_size) {
  return evaluate_rows(pack_x_y(std::move(x), std::move(y)), std::move(options), batch_size);
}

std::map<std::string, double> Model::evaluate_rows(const data::Element& xy, EvaluateOptions options,
                                                   int64_t batch_size) {
  check_rows(xy, "evaluate");
  if (batch_size < 1)
    throw InvalidArgumentError(
        fmt::format("evaluate: batch_size must be >= 1, got {}", batch_size));
  return evaluate(slices(xy).batch(batch_size), std::move(options));
}

}  // namespace est::keras
