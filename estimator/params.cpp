// Params lookups with typed errors, and est::params(ctx)'s check of its argument: the
// EstimatorContext that ctx is (a dynamic_cast: model_fn sees a plain ModelContext&), marked by
// the Estimator's ModelFnCall for the call.
#include "estimator/params.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est {
namespace {

const char* type_name(const ParamValue& value) {
  switch (value.index()) {
    case 0:
      return "bool";
    case 1:
      return "int64";
    case 2:
      return "double";
    default:
      return "string";
  }
}

const ParamValue& lookup(const std::map<std::string, ParamValue>& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) {
    std::string known;
    for (const auto& [key, value] : values) known += (known.empty() ? "" : ", ") + key;
    throw NotFoundError(
        fmt::format("params: no parameter '{}' (given: {}); pass it in the "
                    "Estimator's params",
                    name, known.empty() ? "none" : known));
  }
  return it->second;
}

template <class T>
const T& typed(const ParamValue& value, const std::string& name, const char* wanted) {
  if (const T* result = std::get_if<T>(&value)) return *result;
  throw InvalidArgumentError(fmt::format("params: parameter '{}' is a {}, asked for as a {}", name,
                                         type_name(value), wanted));
}

}  // namespace

bool Params::get_bool(const std::string& name) const {
  return typed<bool>(lookup(values_, name), name, "bool");
}

int64_t Params::get_int(const std::string& name) const {
  return typed<int64_t>(lookup(values_, name), name, "int64");
}

double Params::get_double(const std::string& name) const {
  const ParamValue& value = lookup(values_, name);
  if (const int64_t* integer = std::get_if<int64_t>(&value)) return static_cast<double>(*integer);
  return typed<double>(value, name, "double");
}

std::string Params::get_string(const std::string& name) const {
  return typed<std::string>(lookup(values_, name), name, "string");
}

double Params::get_double(const std::string& name, double fallback) const {
  return contains(name) ? get_double(name) : fallback;
}

int64_t Params::get_int(const std::string& name, int64_t fallback) const {
  return contains(name) ? get_int(name) : fallback;
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
