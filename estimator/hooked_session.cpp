// HookedSession: begin, after_create_session (with the digest that tells whether it assigned a
// variable), before_run / after_run around a step with the fetches resolved by name, end.
#include "estimator/hooked_session.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "estimator/loop_util.h"
#include "ops/error.h"

namespace est::detail {
namespace {

// A tensor model_fn named (est::identity or a summary), by its name or TF's "name:0".
std::optional<Tensor> find_named_tensor(const EstimatorSpec& spec, const std::string& name) {
  std::string_view key = name;
  if (key.size() > 2 && key.substr(key.size() - 2) == ":0") key.remove_suffix(2);
  auto it = spec.named_tensors.find(std::string(key));
  if (it == spec.named_tensors.end()) return std::nullopt;
  return it->second;
}

// The hooks' fetches after a step, by name: "loss", "global_step" (its value before the
// step), prediction keys, named tensors, variables; hook-supplied tensors as given.
SessionRunValues resolve_fetches(const std::vector<SessionRunArgs>& args, const EstimatorSpec& spec,
                                 const Session& session, int64_t step_before, int64_t step_after) {
  SessionRunValues values;
  values.global_step = step_after;
  for (const SessionRunArgs& request : args) {
    for (const auto& [key, tensor] : request.tensors) values.results[key] = tensor;
    for (const std::string& name : request.fetches) {
      if (values.results.count(name)) continue;
      Tensor value;
      if (name == "loss" && spec.loss.defined()) {
        value = spec.loss;
      } else if (name == "global_step") {
        value = Tensor::scalar(static_cast<double>(step_before), DType::kI64);
      } else if (auto it = spec.predictions.find(name); it != spec.predictions.end()) {
        value = it->second;
      } else if (auto named = find_named_tensor(spec, name)) {
        value = *named;
      } else if (auto variable = session.store().find(name)) {
        value = variable->value;
      } else {
        std::string known = "loss, global_step";
        for (const auto& [key, tensor] : spec.predictions) known += ", " + key;
        for (const auto& [key, tensor] : spec.named_tensors) known += ", " + key;
        throw NotFoundError(fmt::format(
            "a hook asked for '{}', which is neither a fetchable name ({}) nor a variable; "
            "supply the tensor in SessionRunArgs::tensors instead",
            name, known));
      }
      values.results[name] = value;
    }
  }
  return values;
}

// FNV-1a over the bytes of every dense variable (host copies), 8 bytes at a time, in four
// interleaved lanes (each multiply waits for the one before it in its lane only), mixed at the
// end. Only compared with another digest of the same process.
uint64_t variables_digest(const nn::VariableStore& store) {
  constexpr uint64_t kPrime = 1099511628211ull;
  std::array<uint64_t, 4> lanes;
  lanes.fill(14695981039346656037ull);
  auto mix = [](uint64_t& lane, uint64_t word) { lane = (lane ^ word) * kPrime; };
  for (const nn::Variable& variable : store.variables()) {
    if (variable.value.is_sparse() || variable.value.dtype() == DType::kString) continue;
    const Tensor host = variable.value.to(Device::cpu());
    const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
    const size_t size = host.nbytes();
    size_t i = 0;
    for (; i + 32 <= size; i += 32)
      for (size_t lane = 0; lane < 4; ++lane) {
        uint64_t word;
        std::memcpy(&word, bytes + i + 8 * lane, 8);
        mix(lanes[lane], word);
      }
    for (; i < size; ++i) mix(lanes[0], bytes[i]);
    mix(lanes[1], size);  // where one variable ends and the next begins
  }
  uint64_t digest = lanes[0];
  for (size_t lane = 1; lane < 4; ++lane) mix(digest, lanes[lane]);
  return digest;
}

}  // namespace

HookedSession::HookedSession(Session session, Hooks hooks)
    : session_(std::move(session)), hooks_(std::move(hooks)) {}

bool HookedSession::create(const Hooks& more, const std::function<void()>& after_begin) {
  hooks_.insert(hooks_.end(), more.begin(), more.end());
  for (const auto& hook : hooks_) hook->begin();
  began_ = true;
  if (after_begin) after_begin();
  if (hooks_.empty()) return false;
  const uint64_t before = variables_digest(session_.store());
  for (const auto& hook : hooks_) hook->after_create_session(session_);
  return variables_digest(session_.store()) != before;
}

bool HookedSession::run(const EstimatorSpec& spec, int64_t step, StepTimings& timings,
                        const std::function<void()>& ops, const std::function<void()>& after_ops) {
  SessionRunContext run_context(session_, spec, step, timings);
  std::vector<SessionRunArgs> args;
  args.reserve(hooks_.size());
  for (const auto& hook : hooks_) args.push_back(hook->before_run(run_context));
  timings.run_begin = steady_seconds();
  ops();
  timings.run_end = steady_seconds();
  if (after_ops) after_ops();
  SessionRunValues values = resolve_fetches(args, spec, session_, step, session_.global_step());
  for (const auto& hook : hooks_) hook->after_run(run_context, values);
  return run_context.stop_requested();
}

void HookedSession::close() {
  if (!began_) return;  // no step ran: the hooks never began
  for (const auto& hook : hooks_) hook->end(session_);
}

}  // namespace est::detail
