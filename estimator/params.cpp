// Params lookups with typed errors (nested Params carry their path for the messages), and
// est::params(ctx)'s check of its argument: the EstimatorContext that ctx is (a dynamic_cast:
// model_fn sees a plain ModelContext&), marked by the Estimator's ModelFnCall for the call.
#include "estimator/params.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est {

ParamValue::ParamValue(const Params& nested) : value_(std::make_shared<const Params>(nested)) {}

std::string ParamValue::type_name() const {
  switch (value_.index()) {
    case 0:
      return "bool";
    case 1:
      return "int64";
    case 2:
      return "double";
    case 3:
      return "string";
    case 4:
      return "list of int64";
    case 5:
      return "list of double";
    case 6:
      return "list of string";
    case 7:
      return "list of feature columns";
    default:
      return "nested Params";
  }
}

Params::Params(std::initializer_list<std::pair<const std::string, ParamValue>> values) {
  for (const auto& [name, value] : values) set(name, value);
}

void Params::set(const std::string& name, ParamValue value) {
  adopt(name, value);
  values_.insert_or_assign(name, std::move(value));
}

void Params::adopt(const std::string& name, ParamValue& value) const {
  auto* nested = std::get_if<std::shared_ptr<const Params>>(&value.value_);
  if (!nested) return;
  auto copy = std::make_shared<Params>();
  copy->path_ = path_ + name + "/";
  for (const auto& [key, inner] : (*nested)->values_) copy->set(key, inner);
  *nested = std::move(copy);
}

const ParamValue& Params::lookup(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    std::string known;
    for (const auto& [key, value] : values_) known += (known.empty() ? "" : ", ") + key;
    throw NotFoundError(
        fmt::format("params: no parameter '{}{}' (given: {}); pass it in the Estimator's params",
                    path_, name, known.empty() ? "none" : known));
  }
  return it->second;
}

template <class T>
const T& Params::typed(const std::string& name, const char* wanted) const {
  const ParamValue& value = lookup(name);
  if (const T* result = std::get_if<T>(&value.variant())) return *result;
  throw InvalidArgumentError(fmt::format("params: parameter '{}{}' is a {}, asked for as a {}",
                                         path_, name, value.type_name(), wanted));
}

bool Params::get_bool(const std::string& name) const { return typed<bool>(name, "bool"); }

int64_t Params::get_int(const std::string& name) const { return typed<int64_t>(name, "int64"); }

double Params::get_double(const std::string& name) const {
  if (const auto* integer = std::get_if<int64_t>(&lookup(name).variant()))
    return static_cast<double>(*integer);
  return typed<double>(name, "double");
}

std::string Params::get_string(const std::string& name) const {
  return typed<std::string>(name, "string");
}

std::vector<int64_t> Params::get_int_list(const std::string& name) const {
  return typed<std::vector<int64_t>>(name, "list of int64");
}

std::vector<double> Params::get_double_list(const std::string& name) const {
  if (const auto* integers = std::get_if<std::vector<int64_t>>(&lookup(name).variant()))
    return std::vector<double>(integers->begin(), integers->end());
  return typed<std::vector<double>>(name, "list of double");
}

std::vector<std::string> Params::get_string_list(const std::string& name) const {
  return typed<std::vector<std::string>>(name, "list of string");
}

const FeatureColumns& Params::get_feature_columns(const std::string& name) const {
  return typed<FeatureColumns>(name, "list of feature columns");
}

std::vector<feature_column::DenseColumnPtr> Params::get_dense_columns(
    const std::string& name) const {
  std::vector<feature_column::DenseColumnPtr> dense;
  for (const feature_column::ColumnPtr& column : get_feature_columns(name)) {
    auto as_dense = std::dynamic_pointer_cast<const feature_column::DenseColumn>(column);
    if (!as_dense)
      throw InvalidArgumentError(fmt::format(
          "params: feature column '{}' of '{}{}' is not a dense column; wrap a categorical "
          "column in indicator_column or embedding_column",
          column->name(), path_, name));
    dense.push_back(std::move(as_dense));
  }
  return dense;
}

const Params& Params::get_params(const std::string& name) const {
  return *typed<std::shared_ptr<const Params>>(name, "nested Params");
}

bool Params::get_bool(const std::string& name, bool fallback) const {
  return contains(name) ? get_bool(name) : fallback;
}

double Params::get_double(const std::string& name, double fallback) const {
  return contains(name) ? get_double(name) : fallback;
}

int64_t Params::get_int(const std::string& name, int64_t fallback) const {
  return contains(name) ? get_int(name) : fallback;
}

std::string Params::get_string(const std::string& name, const std::string& fallback) const {
  return contains(name) ? get_string(name) : fallback;
}

std::vector<int64_t> Params::get_int_list(const std::string& name,
                                          const std::vector<int64_t>& fallback) const {
  return contains(name) ? get_int_list(name) : fallback;
}

const EstimatorContext& estimator_context(const ModelContext& ctx) {
  const auto* estimator = dynamic_cast<const EstimatorContext*>(&ctx);
  if (estimator == nullptr || !estimator->in_model_fn())
    throw FailedPreconditionError(
        "params/run_config(ctx): ctx is not the context of an Estimator's model_fn call; call "
        "them only inside model_fn, with the ctx the Estimator passed");
  return *estimator;
}

}  // namespace est
