// compile()'s losses and metrics conformed to the model's outputs (see compile_utils.h).
#include "keras/compile_utils.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::keras {
namespace {

// map_to_output_names: a structure per output, from a map keyed by output name (a key naming no
// output is an error) or a list in output order (its length must match).
template <class T>
std::vector<std::optional<T>> per_output(const std::map<std::string, T>& by_name,
                                         const std::vector<std::string>& outputs,
                                         const std::string& model, const char* what) {
  std::vector<std::optional<T>> out(outputs.size());
  std::vector<std::string> unknown;
  for (const auto& [name, value] : by_name) {
    auto it = std::find(outputs.begin(), outputs.end(), name);
    if (it == outputs.end())
      unknown.push_back(name);
    else
      out[it - outputs.begin()] = value;
  }
  if (!unknown.empty())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": compile's {} has keys {} that do not correspond to any model output; the "
        "output names are {}",
        model, what, quoted_list(unknown), quoted_list(outputs)));
  return out;
}

template <class T>
std::vector<std::optional<T>> per_output(const std::vector<T>& list,
                                         const std::vector<std::string>& outputs,
                                         const std::string& model, const char* what) {
  if (list.size() != outputs.size())
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\" has {} outputs {} but compile's {} is a list of {}; give one per output, "
        "in the outputs' order, or key them by output name",
        model, outputs.size(), quoted_list(outputs), what, list.size()));
  return {list.begin(), list.end()};
}

std::optional<Loss> loss_of(const LossArg& arg) {
  if (!arg) return std::nullopt;
  if (const auto* name = std::get_if<std::string>(&*arg)) return get_loss(*name);
  return std::get<Loss>(*arg);
}

}  // namespace

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return "[" + out + "]";
}

CompiledLossesAndMetrics::CompiledLossesAndMetrics(const CompileOptions& options,
                                                   std::vector<std::string> output_names,
                                                   const std::string& model)
    : model_(model), output_names_(output_names) {
  const size_t n = output_names.size();
  outputs_.resize(n);
  for (size_t i = 0; i < n; ++i) outputs_[i].name = output_names[i];
  // Losses: one for every output, or per output.
  std::vector<LossArg> losses(n);
  if (const auto* name = std::get_if<std::string>(&options.loss)) {
    if (name->empty())
      throw InvalidArgumentError(
          "compile: no loss; pass .loss = \"sparse_categorical_crossentropy\" (or another "
          "name) or a loss object such as keras::losses::SparseCategoricalCrossentropy(true)");
    losses.assign(n, LossArg(*name));
  } else if (const auto* loss = std::get_if<Loss>(&options.loss)) {
    losses.assign(n, LossArg(*loss));
  } else if (const auto* list = std::get_if<LossList>(&options.loss)) {
    for (size_t i = 0; auto& arg : per_output(*list, output_names, model, "loss"))
      losses[i++] = arg ? *arg : LossArg();
  } else {
    for (size_t i = 0;
         auto& arg : per_output(std::get<LossMap>(options.loss), output_names, model, "loss"))
      losses[i++] = arg ? *arg : LossArg();
  }
  bool any_loss = false;
  for (size_t i = 0; i < n; ++i) {
    outputs_[i].loss = loss_of(losses[i]);
    any_loss = any_loss || outputs_[i].loss.has_value();
  }
  if (!any_loss)
    throw InvalidArgumentError(fmt::format(
        "Model \"{}\": compile's loss gives no loss for any of the outputs {}; give a loss for "
        "at least one",
        model, quoted_list(output_names)));
  // Loss weights: none, or per output.
  std::vector<std::optional<double>> weights(n);
  if (const auto* list = std::get_if<LossWeightList>(&options.loss_weights))
    weights = per_output(*list, output_names, model, "loss_weights");
  else if (const auto* map = std::get_if<LossWeightMap>(&options.loss_weights))
    weights = per_output(*map, output_names, model, "loss_weights");
  for (size_t i = 0; i < n; ++i) outputs_[i].weight = weights[i];
  // Metrics: a flat list for every output, or per output.
  std::vector<std::optional<MetricList>> metrics(n);
  if (const auto* list = std::get_if<MetricList>(&options.metrics.value()))
    metrics.assign(n, *list);
  else if (const auto* lists = std::get_if<MetricLists>(&options.metrics.value()))
    metrics = per_output(*lists, output_names, model, "metrics");
  else
    metrics =
        per_output(std::get<MetricMap>(options.metrics.value()), output_names, model, "metrics");
  // The logs: loss, the outputs' losses (several outputs), the outputs' metrics.
  names_.push_back("loss");
  if (n > 1)
    for (const auto& output : outputs_)
      if (output.loss) names_.push_back(output.name + "_loss");
  std::set<std::string> seen(names_.begin(), names_.end());
  for (size_t i = 0; i < n; ++i) {
    if (!metrics[i]) continue;
    for (const auto& metric : *metrics[i]) {
      check_metric_name(metric);
      std::string logged = n > 1 ? outputs_[i].name + "_" + metric : metric;
      if (!seen.insert(logged).second)
        throw InvalidArgumentError(fmt::format(
            "Model \"{}\": found two metrics with the same name: {}. All the metrics added to "
            "the model need to have unique names",
            model, logged));
      outputs_[i].metrics.push_back(metric);
      outputs_[i].metric_names.push_back(logged);
      names_.push_back(logged);
    }
  }
}

std::vector<std::string> CompiledLossesAndMetrics::metric_names() const {
  std::vector<std::string> out;
  for (const auto& output : outputs_)
    out.insert(out.end(), output.metric_names.begin(), output.metric_names.end());
  return out;
}

bool CompiledLossesAndMetrics::needs_target(size_t output) const {
  return outputs_.at(output).loss || !outputs_.at(output).metrics.empty();
}

CompiledLossesAndMetrics::Step CompiledLossesAndMetrics::operator()(
    const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred,
    const std::vector<Tensor>& regularization_losses) const {
  Step step;
  std::vector<Tensor> output_losses(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Output& output = outputs_[i];
    if (!needs_target(i)) continue;
    if (!y_true.at(i).defined())
      throw InvalidArgumentError(fmt::format(
          "Model \"{}\": fit and evaluate need y for output \"{}\", which has a loss or "
          "metrics: a dataset of (x, y) with y keyed by output name (keras::pack_x_y), or "
          "compile it without a loss and metrics for that output",
          model_, output.name));
    if (step.rows == 0) step.rows = static_cast<double>(y_true[i].shape().at(0));
    if (!output.loss) continue;
    output_losses[i] = output.loss->fn(y_true[i], y_pred.at(i));
    const bool first = !step.loss.defined();
    if (first || step.reduction != output.loss->reduction)
      step.reduction = first ? output.loss->reduction : std::nullopt;
    Tensor weighted = output.weight ? ops::mul(output_losses[i], *output.weight) : output_losses[i];
    step.loss = step.loss.defined() ? ops::add(step.loss, weighted) : weighted;
  }
  for (const Tensor& penalty : regularization_losses) step.loss = ops::add(step.loss, penalty);
  ops::NoGradGuard no_grad;
  Tensor rows = Tensor::scalar(step.rows);
  step.ops["loss"] = nn::metrics::mean(step.loss.detach(), rows);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Output& output = outputs_[i];
    if (outputs_.size() > 1 && output.loss)
      step.ops[output.name + "_loss"] = nn::metrics::mean(output_losses[i].detach(), rows);
    for (size_t m = 0; m < output.metrics.size(); ++m)
      step.ops[output.metric_names[m]] =
          get_metric(output.metrics[m], y_true[i].shape(), y_pred[i].shape())
              .fn(y_true[i], y_pred[i].detach());
  }
  for (const auto& name : names_) step.means.push_back(step.ops.at(name).result());
  return step;
}

}  // namespace est::keras
