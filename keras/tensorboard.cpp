// keras.callbacks.TensorBoard (Keras 2.x); see tensorboard.h.
#include "keras/tensorboard.h"

#include <fmt/format.h>

#include <filesystem>

#include "checkpoint/reader.h"
#include "estimator/summary_writer.h"
#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {

TensorBoard::TensorBoard(TensorBoardOptions options) : options_(std::move(options)) {
  if (options_.log_dir.empty())
    throw InvalidArgumentError("TensorBoard: log_dir is empty; give the directory to write to");
  if (options_.histogram_freq < 0)
    throw InvalidArgumentError(fmt::format(
        "TensorBoard: histogram_freq {} must be >= 0 (0: no histograms)", options_.histogram_freq));
  const auto* name = std::get_if<std::string>(&options_.update_freq);
  update_freq_ = name != nullptr && *name == "batch"  // Keras: 'batch' is 1
                     ? 1
                     : batches_or_epoch(options_.update_freq, "TensorBoard: update_freq");
}

TensorBoard::~TensorBoard() = default;

void TensorBoard::on_train_begin(const Logs&) {
  RunConfig config = model()->config();
  if (config.read_tf_config) config = config.with_tf_config();
  log_dir_ = options_.log_dir;
  temporary_ = !config.is_chief;
  if (temporary_) log_dir_ = fmt::format("{}/workertemp_{}", options_.log_dir, config.task_id);
  train_ = std::make_unique<SummaryWriter>(log_dir_ + "/train");
  validation_.reset();
  train_step_ = 0;
}

void TensorBoard::on_train_batch_end(int64_t, const Logs& logs) {
  ++train_step_;
  if (update_freq_ == 0 || train_step_ % update_freq_ != 0) return;
  for (const auto& [name, value] : logs) train_->add_scalar("batch_" + name, value, train_step_);
}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  for (const auto& [name, value] : logs) {
    if (name.starts_with("val_")) {
      if (!validation_) validation_ = std::make_unique<SummaryWriter>(log_dir_ + "/validation");
      validation_->add_scalar("epoch_" + name.substr(4), value, epoch);
    } else {
      train_->add_scalar("epoch_" + name, value, epoch);
    }
  }
  if (options_.histogram_freq > 0 && epoch % options_.histogram_freq == 0) log_weights(epoch);
  train_->flush();
  if (validation_) validation_->flush();
}

void TensorBoard::log_weights(int epoch) {
  // The epoch's train() saved the variables into model_dir.
  checkpoint::TensorBundle state = checkpoint::load(model()->config().model_dir);
  for (const auto& [name, spec] : model()->weights()) {
    const checkpoint::TensorEntry* weight = state.find(name);
    if (weight == nullptr) continue;  // not created by the step (never happens for layers)
    train_->add_histogram(name + "_0/histogram", weight->value.to_vector<double>(), epoch);
  }
}

void TensorBoard::on_train_end(const Logs&) {
  train_.reset();
  validation_.reset();
  if (temporary_) {
    std::error_code ignored;
    std::filesystem::remove_all(log_dir_, ignored);
  }
}

}  // namespace est::keras
