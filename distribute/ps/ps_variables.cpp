// PsVariables: splitting and joining parts, and the requests of a step.
#include "distribute/ps/ps_variables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "distribute/net/step_profile.h"
#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";
using Clock = std::chrono::steady_clock;

size_t row_bytes(const ops::Tensor& t) {
  return t.shape().empty() || t.shape()[0] == 0 ? 0
                                                : t.nbytes() / static_cast<size_t>(t.shape()[0]);
}

ops::Tensor host(const ops::Tensor& t) {
  return t.device().is_cpu() ? t : t.to(ops::Device::cpu());
}

// Rows [begin, end) of `whole`, copied.
ops::Tensor rows(const ops::Tensor& whole, int64_t begin, int64_t end) {
  ops::Tensor source = host(whole);
  ops::Shape shape = source.shape();
  shape[0] = end - begin;
  ops::Tensor part = ops::Tensor::empty(shape, source.dtype());
  size_t stride = row_bytes(source);
  std::memcpy(part.raw_data(), static_cast<const char*>(source.raw_data()) + begin * stride,
              part.nbytes());
  return part;
}

// Writes `part` into rows starting at `begin` of the host tensor `whole`.
void set_rows(ops::Tensor& whole, int64_t begin, const ops::Tensor& part) {
  std::memcpy(static_cast<char*>(whole.raw_data()) + begin * row_bytes(whole), part.raw_data(),
              part.nbytes());
}

// The slices' rows in [begin, end), renumbered from `begin` (a part's share of a row-sparse
// gradient), on the host.
ops::IndexedSlices rows_in(const ops::IndexedSlices& slices, int64_t begin, int64_t end) {
  const std::vector<int64_t> index = slices.indices.to_vector<int64_t>();
  std::vector<int64_t> at, local;
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] >= begin && index[i] < end) {
      at.push_back(static_cast<int64_t>(i));
      local.push_back(index[i] - begin);
    }
  ops::Shape shape = slices.dense_shape;
  shape[0] = end - begin;
  ops::NoGradGuard no_grad;
  ops::Tensor values = ops::gather(host(slices.values), ops::Tensor::from_vector(at));
  return {ops::Tensor::from_vector(local), values, shape};
}

// Whether two dense numeric tensors hold the same bytes in memory (one decoded into the other).
bool same_storage(const ops::Tensor& a, const ops::Tensor& b) {
  auto plain = [](const ops::Tensor& t) {
    return t.defined() && !t.is_sparse() && !ops::is_string(t.dtype()) && t.nbytes() > 0;
  };
  return plain(a) && plain(b) && a.raw_data() == b.raw_data();
}

void write_into(nn::VariableStore& store, const std::string& name, const ops::Tensor& value) {
  ops::NoGradGuard no_grad;
  store.assign(name, value);
}

}  // namespace

PsVariables::PsVariables(PsClient& client, PsPlacement& placement)
    : client_(&client), placement_(&placement) {
  if (client.num_ps() != placement.num_ps())
    throw InvalidArgumentError(fmt::format("PsVariables: {} ps connections for a placement on {}",
                                           client.num_ps(), placement.num_ps()));
  staged_.assign(static_cast<size_t>(client.num_ps()), false);
}

void PsVariables::place(const nn::VariableStore& store, const std::vector<std::string>& names) {
  for (const std::string& name : names) place(name, store.get(name).value);
}

const PsVariable& PsVariables::place(const std::string& name, const ops::Tensor& value) {
  const PsVariable& placed = placement_->place(name, value.shape(), value.dtype());
  log::debug("Variable {}: {}", name, describe(placed));
  return placed;
}

const PsVariable* PsVariables::owner(const std::string& name, std::string* suffix) const {
  // The longest placed prefix ending at a '/' (a slot), or the name itself.
  for (size_t end = name.size(); end != std::string::npos && end > 0;
       end = name.rfind('/', end - 1)) {
    if (const PsVariable* v = placement_->find(name.substr(0, end))) {
      *suffix = name.substr(end);
      return v;
    }
    if (end == 0) break;
  }
  return nullptr;
}

void PsVariables::initialize(const std::vector<NamedTensor>& values) {
  std::vector<std::optional<PsRequest>> requests(static_cast<size_t>(client_->num_ps()));
  auto to = [&](int ps) -> PsRequest& {
    auto& request = requests[static_cast<size_t>(ps)];
    if (!request) request = PsRequest{.kind = PsRequestKind::kInitialize};
    return *request;
  };
  for (const NamedTensor& value : values) {
    std::string suffix;
    const PsVariable* variable = owner(value.name, &suffix);
    if (!variable) {  // optimizer state that is no slot: every task keeps its own
      for (int ps = 0; ps < client_->num_ps(); ++ps) to(ps).tensors.push_back(value);
      continue;
    }
    for (const PsShard& shard : variable->shards) {
      ops::Tensor part = variable->partitioned() ? rows(value.value, shard.row_begin, shard.row_end)
                                                 : host(value.value);
      to(shard.ps).tensors.push_back({shard.name + suffix, part});
    }
  }
  client_->exchange(requests, "initializing the variables on the ps tasks");
}

int64_t PsVariables::pull(nn::VariableStore& store, std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    try {
      return push_pull({}, store, 0);
    } catch (const FailedPreconditionError& error) {  // not initialized yet
      if (Clock::now() > deadline)
        throw DeadlineExceededError(fmt::format(
            "the chief did not initialize the ps tasks within {} s: {}",
            std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), error.what()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

std::vector<std::optional<PsReply>> PsVariables::exchange_once_initialized(
    const std::vector<std::optional<PsRequest>>& requests, const std::string& name,
    const std::string& what, std::chrono::milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    try {
      return client_->exchange(requests, what);
    } catch (const FailedPreconditionError& error) {  // not initialized yet
      if (Clock::now() > deadline)
        throw DeadlineExceededError(fmt::format(
            "the chief did not initialize '{}' on the ps tasks within {} s: {}", name,
            std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), error.what()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

ops::Tensor PsVariables::pull_variable(const std::string& name, std::chrono::milliseconds timeout) {
  const PsVariable* variable = placement_->find(name);
  if (!variable) throw InvalidArgumentError(fmt::format("'{}' is not on the ps tasks", name));
  std::vector<std::optional<PsRequest>> requests(static_cast<size_t>(client_->num_ps()));
  for (const PsShard& shard : variable->shards) {
    auto& request = requests[static_cast<size_t>(shard.ps)];
    if (!request) request = PsRequest{.kind = PsRequestKind::kPull};
    request->names.push_back(shard.name);
  }
  auto replies =
      exchange_once_initialized(requests, name, fmt::format("pulling '{}'", name), timeout);
  std::map<std::string, ops::Tensor> fresh;
  for (const auto& reply : replies)
    if (reply)
      for (const NamedTensor& t : reply->tensors) fresh[t.name] = t.value;
  if (!variable->partitioned()) return fresh.at(name);
  ops::Tensor whole = ops::Tensor::empty(variable->shape, variable->dtype);
  for (const PsShard& shard : variable->shards)
    set_rows(whole, shard.row_begin, fresh.at(shard.name));
  return whole;
}

void PsVariables::add_gradients(const std::vector<nn::GradAndVar>& grads,
                                std::vector<std::optional<PsRequest>>& requests,
                                PsRequestKind kind) const {
  for (const nn::GradAndVar& entry : grads) {
    if (!entry.has_gradient()) continue;
    const PsVariable* variable = placement_->find(entry.name);
    if (!variable)
      throw InvalidArgumentError(fmt::format(
          "a gradient for '{}', which is not on the ps tasks (it was created after the first "
          "step?)",
          entry.name));
    const ops::IndexedSlices& slices = entry.sparse_gradient;
    for (const PsShard& shard : variable->shards) {
      NamedTensor gradient{.name = shard.name};
      if (slices.defined()) {  // rows only, each to the part that holds it
        gradient.rows = rows_in(slices, shard.row_begin, shard.row_end);
        if (gradient.rows.num_rows() == 0) continue;
      } else {
        gradient.value = variable->partitioned()
                             ? rows(entry.gradient, shard.row_begin, shard.row_end)
                             : entry.gradient.detach();
      }
      PsRequest& request = *requests[static_cast<size_t>(shard.ps)];
      request.kind = kind;
      request.tensors.push_back(std::move(gradient));
    }
  }
}

void PsVariables::stage(const std::vector<nn::GradAndVar>& grads) {
  std::vector<std::optional<PsRequest>> requests(static_cast<size_t>(client_->num_ps()),
                                                 PsRequest{.kind = PsRequestKind::kStage});
  add_gradients(grads, requests, PsRequestKind::kStage);
  for (size_t ps = 0; ps < requests.size(); ++ps) {
    if (requests[ps]->tensors.empty()) continue;
    staged_[ps] = true;
    client_->send(static_cast<int>(ps), *requests[ps], "sending a training step's gradients");
  }
}

void PsVariables::discard_staged() noexcept {
  for (size_t ps = 0; ps < staged_.size(); ++ps) {
    if (!staged_[ps]) continue;
    staged_[ps] = false;
    try {
      client_->send(static_cast<int>(ps), PsRequest{.kind = PsRequestKind::kDiscardStaged},
                    "dropping a failed step's gradients");
    } catch (const Error& error) {
      log::debug("{} did not take the request to drop staged gradients: {}",
                 client_->describe(static_cast<int>(ps)), error.what());
    }
  }
}

void PsVariables::add_moving_averages(const std::vector<PsMovingAverage>& moving_averages,
                                      std::vector<std::optional<PsRequest>>& requests,
                                      PsRequestKind kind) const {
  for (const PsMovingAverage& average : moving_averages) {
    const PsVariable* variable = placement_->find(average.name);
    if (!variable)
      throw InvalidArgumentError(
          fmt::format("a moving average of '{}', which is not on the ps tasks", average.name));
    for (const PsShard& shard : variable->shards) {
      PsRequest& request = *requests[static_cast<size_t>(shard.ps)];
      request.kind = kind;
      ops::Tensor value = variable->partitioned()
                              ? rows(average.value, shard.row_begin, shard.row_end)
                              : host(average.value);
      request.moving_averages.push_back({shard.name, value, average.momentum});
    }
  }
}

int64_t PsVariables::push_pull(const std::vector<nn::GradAndVar>& grads, nn::VariableStore& store,
                               int64_t global_step_seen,
                               const std::vector<PsMovingAverage>& moving_averages,
                               const std::set<std::string>& not_pulled) {
  size_t num_ps = static_cast<size_t>(client_->num_ps());
  bool staged = std::find(staged_.begin(), staged_.end(), true) != staged_.end();
  bool pushing = !grads.empty() || !moving_averages.empty() || staged;
  std::vector<std::optional<PsRequest>> requests(num_ps);
  for (size_t ps = 0; ps < num_ps; ++ps) {
    requests[ps] = PsRequest{.kind = PsRequestKind::kPull, .global_step = global_step_seen};
    // A task that holds staged gradients applies them with this push.
    if (staged_[ps]) requests[ps]->kind = PsRequestKind::kPushPull;
  }
  // The global step counts every push: its task takes part in each one.
  if (pushing) requests[0]->kind = PsRequestKind::kPushPull;
  add_gradients(grads, requests, PsRequestKind::kPushPull);
  add_moving_averages(moving_averages, requests, PsRequestKind::kPushPull);
  add_pulls(requests, not_pulled);
  // Sent (or the connection failed, which drops them too): no longer staged.
  std::fill(staged_.begin(), staged_.end(), false);
  // The values of whole variables are decoded straight into the store's host tensors.
  std::map<std::string, ops::Tensor, std::less<>> targets;
  for (const PsVariable& variable : placement_->variables()) {
    if (variable.name == kGlobalStep || not_pulled.contains(variable.name) ||
        variable.partitioned() || !store.contains(variable.name))
      continue;
    ops::Tensor value = store.get(variable.name).value;
    if (value.device().is_cpu()) targets.emplace(variable.name, value);
  }
  auto replies = client_->exchange(
      requests, pushing ? "a training step's push and pull" : "pulling the variables",
      [&](const std::string& name) -> ops::Tensor* {
        auto it = targets.find(name);
        return it == targets.end() ? nullptr : &it->second;
      });
  return write_pulled(replies, store, not_pulled);
}

void PsVariables::add_pulls(std::vector<std::optional<PsRequest>>& requests,
                            const std::set<std::string>& not_pulled) const {
  for (const PsVariable& variable : placement_->variables()) {
    if (variable.name == kGlobalStep || not_pulled.contains(variable.name)) continue;
    for (const PsShard& shard : variable.shards)
      requests[static_cast<size_t>(shard.ps)]->names.push_back(shard.name);
  }
}

int64_t PsVariables::write_pulled(const std::vector<std::optional<PsReply>>& replies,
                                  nn::VariableStore& store,
                                  const std::set<std::string>& not_pulled) const {
  step_profile::Scope writing(step_profile::kPsWrite);
  std::map<std::string, ops::Tensor> fresh;
  int64_t global_step = -1;
  for (const auto& reply : replies) {
    if (!reply) continue;
    for (const NamedTensor& t : reply->tensors) fresh[t.name] = t.value;
    if (reply->global_step >= 0) global_step = reply->global_step;
  }
  for (const PsVariable& variable : placement_->variables()) {
    if (variable.name == kGlobalStep || not_pulled.contains(variable.name)) continue;
    if (!variable.partitioned()) {
      const ops::Tensor& value = fresh.at(variable.name);
      // Decoded into the store already (exchange's `into`), or a fresh tensor to copy.
      if (!same_storage(value, store.get(variable.name).value))
        write_into(store, variable.name, value);
      continue;
    }
    ops::Tensor whole = ops::Tensor::empty(variable.shape, variable.dtype);
    for (const PsShard& shard : variable.shards)
      set_rows(whole, shard.row_begin, fresh.at(shard.name));
    write_into(store, variable.name, whole);
  }
  if (global_step >= 0 && store.contains(kGlobalStep)) {
    ops::NoGradGuard no_grad;
    store.get(kGlobalStep).value.data<int64_t>()[0] = global_step;
  }
  return global_step;
}

std::set<int64_t> PsVariables::rows_read(const std::string& name, const ops::Tensor& ids) const {
  const PsVariable* variable = placement_->find(name);
  if (!variable) throw InvalidArgumentError(fmt::format("'{}' is not on the ps tasks", name));
  if (variable->shape.empty())
    throw InvalidArgumentError(fmt::format("'{}' is a scalar: it has no rows to look up", name));
  const int64_t num_rows = variable->shape[0];
  std::set<int64_t> wanted;
  ops::NoGradGuard no_grad;
  for (int64_t id : host(ops::cast(ids, ops::DType::kI64)).to_vector<int64_t>()) {
    if (id < 0) continue;  // no row: safe_embedding_lookup_sparse skips it
    if (id >= num_rows)
      throw InvalidArgumentError(fmt::format(
          "an embedding lookup reads row {} of '{}', which has {} rows: the ids must lie in "
          "[0, {}) (check the vocabulary size or num_buckets against the ids)",
          id, name, num_rows, num_rows));
    wanted.insert(id);
  }
  return wanted;
}

void PsVariables::pull_rows(const std::string& name, const ops::Tensor& ids, ops::Tensor& into,
                            std::chrono::milliseconds wait_for_chief) {
  const std::set<int64_t> wanted = rows_read(name, ids);
  if (wanted.empty()) return;
  const PsVariable* variable = placement_->find(name);
  // Each id from the part whose row range holds it, renumbered within the part.
  std::vector<std::optional<PsRequest>> requests(static_cast<size_t>(client_->num_ps()));
  std::map<std::string, std::vector<int64_t>> global;  // part -> the ids asked of it
  auto id = wanted.begin();
  for (const PsShard& shard : variable->shards) {
    std::vector<int64_t> local;
    for (; id != wanted.end() && *id < shard.row_end; ++id) {
      local.push_back(*id - shard.row_begin);
      global[shard.name].push_back(*id);
    }
    if (local.empty()) continue;
    auto& request = requests[static_cast<size_t>(shard.ps)];
    if (!request) request = PsRequest{.kind = PsRequestKind::kPullRows};
    request->tensors.push_back({shard.name, ops::Tensor::from_vector(local)});
  }
  auto replies = exchange_once_initialized(
      requests, name, fmt::format("pulling rows of '{}'", name), wait_for_chief);
  ops::NoGradGuard no_grad;
  ops::Tensor target = host(into);
  for (const auto& reply : replies)
    if (reply)
      for (const NamedTensor& t : reply->tensors)
        ops::scatter_rows(target, ops::Tensor::from_vector(global.at(t.name)), t.value);
  if (!into.device().is_cpu()) into.copy_from(target.to(into.device()));
}

std::vector<NamedTensor> PsVariables::pull_all() {
  auto replies = client_->broadcast(PsRequest{.kind = PsRequestKind::kPullAll},
                                    "reading the variables for a checkpoint");
  std::vector<NamedTensor> result;
  std::map<std::string, size_t> seen;  // one process's name -> index in result
  // Parts of partitioned variables and their slots: name -> (row_begin, part) per part.
  std::map<std::string, std::vector<std::pair<int64_t, ops::Tensor>>> parts;
  for (const auto& reply : replies)
    for (const NamedTensor& t : reply->tensors) {
      std::string name = t.name;
      std::string suffix;
      // "emb/part_1/Adagrad": the variable "emb", its part 1, slot "/Adagrad".
      bool is_part = false;
      for (const PsVariable& v : placement_->variables()) {
        if (!v.partitioned()) continue;
        for (const PsShard& shard : v.shards)
          if (name == shard.name || name.starts_with(shard.name + "/")) {
            std::string whole = v.name + name.substr(shard.name.size());
            parts[whole].emplace_back(shard.row_begin, t.value);
            is_part = true;
          }
      }
      if (is_part || seen.contains(name)) continue;  // non-slot state: the first task's
      seen[name] = result.size();
      result.push_back(t);
    }
  for (auto& [name, pieces] : parts) {
    ops::Shape shape = pieces.front().second.shape();
    shape[0] = 0;
    for (const auto& piece : pieces) shape[0] += piece.second.shape()[0];
    ops::Tensor whole = ops::Tensor::empty(shape, pieces.front().second.dtype());
    for (const auto& [begin, piece] : pieces) set_rows(whole, begin, piece);
    result.push_back({name, whole});
  }
  return result;
}

void PsVariables::finish(const std::string& task, bool chief) {
  PsRequest request{.kind = chief ? PsRequestKind::kEndJob : PsRequestKind::kWorkerDone,
                    .message = task};
  client_->broadcast(request, chief ? "ending the job" : "saying this task is done", true);
}

void PsVariables::abort(const std::string& message) noexcept {
  try {
    client_->broadcast(PsRequest{.kind = PsRequestKind::kAbort, .message = message},
                       "reporting the job's failure", true);
  } catch (...) {
  }
}

}  // namespace est::distribute
