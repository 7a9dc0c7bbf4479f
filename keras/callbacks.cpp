// History, ProgbarLogger and CallbackList (keras/callbacks.py, Keras 2.x).
#include "keras/callbacks.h"

#include <fmt/format.h>

#include "ops/error.h"
#include "ops/logging.h"

namespace est::keras {
namespace {

// The logs as the progress bar shows them, in Keras's insertion order (`order`: loss, the
// compiled metrics, then their val_ ones), any other entry after them.
Progbar::Values ordered(const Logs& logs, const std::vector<std::string>& order) {
  Progbar::Values values;
  for (const auto& key : order)
    if (auto it = logs.find(key); it != logs.end()) values.emplace_back(key, it->second);
  for (const auto& [key, value] : logs)
    if (std::find(order.begin(), order.end(), key) == order.end()) values.emplace_back(key, value);
  return values;
}

}  // namespace

int64_t batches_or_epoch(const BatchFrequency& frequency, const std::string& what) {
  if (const auto* name = std::get_if<std::string>(&frequency)) {
    if (*name == "epoch") return 0;
    throw InvalidArgumentError(fmt::format(
        "{} \"{}\" is not recognized; use \"epoch\" or a positive number of batches", what, *name));
  }
  int64_t batches = std::get<int64_t>(frequency);
  if (batches <= 0)
    throw InvalidArgumentError(
        fmt::format("{} {} must be a positive number of batches, or \"epoch\"", what, batches));
  return batches;
}

const std::vector<double>& History::operator[](const std::string& key) const {
  auto it = history.find(key);
  if (it == history.end()) {
    std::string keys;
    for (const auto& [name, values] : history) keys += (keys.empty() ? "" : ", ") + name;
    throw NotFoundError(
        fmt::format("History has no \"{}\"; it has: {}", key, keys.empty() ? "nothing" : keys));
  }
  return it->second;
}

void History::on_train_begin(const Logs&) { epoch.clear(); }

void History::on_epoch_end(int epoch_index, const Logs& logs) {
  epoch.push_back(epoch_index);
  for (const auto& [key, value] : logs) history[key].push_back(value);
}

ProgbarLogger::ProgbarLogger(int verbose, ProgbarOutput output, std::vector<std::string> names)
    : verbose_(verbose), output_(std::move(output)), names_(std::move(names)) {}

void ProgbarLogger::on_epoch_begin(int epoch, const Logs&) {
  int64_t epochs = params().count("epochs") ? params().at("epochs") : 1;
  if (epochs > 1) output_.write(fmt::format("Epoch {}/{}\n", epoch + 1, epochs));
  std::optional<int64_t> target;
  if (params().count("steps")) target = params().at("steps");
  progbar_ = std::make_unique<Progbar>(target, verbose_, output_);
  seen_ = 0;
}

void ProgbarLogger::on_train_batch_end(int64_t batch, const Logs& logs) {
  seen_ = batch + 1;
  if (progbar_) progbar_->update(seen_, ordered(logs, names_), false);
}

void ProgbarLogger::on_epoch_end(int, const Logs& logs) {
  if (!progbar_) return;
  // _finalize_progbar: the target becomes the steps seen, the epoch's logs shown.
  progbar_->set_target(seen_);
  std::vector<std::string> order = names_;
  for (const auto& name : names_) order.push_back("val_" + name);
  progbar_->update(seen_, ordered(logs, order), true);
}

CallbackList::CallbackList(Callbacks callbacks, Model* model, std::map<std::string, int64_t> params)
    : callbacks_(std::move(callbacks)) {
  for (const auto& callback : callbacks_) {
    if (!callback) throw InvalidArgumentError("fit: a callback in FitOptions::callbacks is null");
    callback->set_model(model);
    callback->set_params(params);
  }
}

void CallbackList::on_train_begin(const Logs& logs) {
  for (const auto& c : callbacks_) c->on_train_begin(logs);
}
void CallbackList::on_train_end(const Logs& logs) {
  for (const auto& c : callbacks_) c->on_train_end(logs);
}
void CallbackList::on_epoch_begin(int epoch, const Logs& logs) {
  for (const auto& c : callbacks_) c->on_epoch_begin(epoch, logs);
}
void CallbackList::on_epoch_end(int epoch, const Logs& logs) {
  for (const auto& c : callbacks_) c->on_epoch_end(epoch, logs);
}
void CallbackList::on_train_batch_begin(int64_t batch, const Logs& logs) {
  for (const auto& c : callbacks_) c->on_train_batch_begin(batch, logs);
}
void CallbackList::on_train_batch_end(int64_t batch, const Logs& logs) {
  for (const auto& c : callbacks_) c->on_train_batch_end(batch, logs);
}

bool CallbackList::saves_after_batch(int64_t batch) const {
  for (const auto& c : callbacks_)
    if (c->saves_after_batch(batch)) return true;
  return false;
}

std::optional<double> monitored(const Logs& logs, const std::string& monitor, const char* who) {
  auto found = logs.find(monitor);
  if (found != logs.end()) return found->second;
  std::string available;
  for (const auto& [key, value] : logs) available += (available.empty() ? "" : ",") + key;
  log::warning("{} conditioned on metric `{}` which is not available. Available metrics are: {}",
               who, monitor, available);
  return std::nullopt;
}

}  // namespace est::keras
