// The callback interface of fit/evaluate/predict (keras/callbacks.py, Keras 2.x: Callback,
// CallbackList, History, ProgbarLogger) and History.
//
// A Callback sees the model (set_model before on_train_begin) and `logs`: the running means of
// the loss and metrics at batch end, the epoch's values (with "val_" ones) at epoch end. More
// callbacks (BackupAndRestore, ModelCheckpoint, EarlyStopping, TensorBoard, ...) derive from
// Callback; a callback that stops training sets model->stop_training = true, as in Keras.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "keras/progbar.h"

namespace est::keras {

class Model;
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  void set_model(Model* model) { model_ = model; }
  Model* model() const { return model_; }
  // fit's parameters: "epochs", "steps", "verbose".
  void set_params(std::map<std::string, int64_t> params) { params_ = std::move(params); }
  const std::map<std::string, int64_t>& params() const { return params_; }

  virtual void on_train_begin(const Logs& /*logs*/) {}
  virtual void on_train_end(const Logs& /*logs*/) {}
  virtual void on_epoch_begin(int /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_epoch_end(int /*epoch*/, const Logs& /*logs*/) {}
  virtual void on_train_batch_begin(int64_t /*batch*/, const Logs& /*logs*/) {}
  virtual void on_train_batch_end(int64_t /*batch*/, const Logs& /*logs*/) {}
  virtual void on_test_begin(const Logs& /*logs*/) {}
  virtual void on_test_end(const Logs& /*logs*/) {}
  virtual void on_test_batch_end(int64_t /*batch*/, const Logs& /*logs*/) {}
  // Whether on_train_batch_end(batch) will save the training session's state (est's, not
  // Keras's: BackupAndRestore with an integer save_freq). Asked before the batch's step, so
  // that under several workers the step gathers every worker's input position for the save.
  virtual bool saves_after_batch(int64_t /*batch*/) const { return false; }

 private:
  Model* model_ = nullptr;
  std::map<std::string, int64_t> params_;
};
using Callbacks = std::vector<std::shared_ptr<Callback>>;

// The monitored value in `logs`; when it is missing, Keras's warning ("<who> conditioned on
// metric `m` which is not available. Available metrics are: a,b") and nullopt.
std::optional<double> monitored(const Logs& logs, const std::string& monitor, const char* who);

// What fit returns (keras.callbacks.History): history["loss"][epoch], epochs run.
class History : public Callback {
 public:
  std::map<std::string, std::vector<double>> history;
  std::vector<int> epoch;
  const std::vector<double>& operator[](const std::string& key) const;

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
};

// Prints Keras's progress (keras.callbacks.ProgbarLogger over utils.Progbar): "Epoch 1/3" when
// there are several epochs, then the bar (verbose 1) or one line per epoch (verbose 2).
class ProgbarLogger : public Callback {
 public:
  // `names`: "loss" and the compiled metrics, in the order the bar shows them.
  ProgbarLogger(int verbose, ProgbarOutput output, std::vector<std::string> names);
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  int verbose_;
  ProgbarOutput output_;
  std::vector<std::string> names_;
  std::unique_ptr<Progbar> progbar_;
  int64_t seen_ = 0;
};

// Calls each callback in order.
class CallbackList {
 public:
  CallbackList(Callbacks callbacks, Model* model, std::map<std::string, int64_t> params);
  void on_train_begin(const Logs& logs);
  void on_train_end(const Logs& logs);
  void on_epoch_begin(int epoch, const Logs& logs);
  void on_epoch_end(int epoch, const Logs& logs);
  void on_train_batch_begin(int64_t batch, const Logs& logs);
  void on_train_batch_end(int64_t batch, const Logs& logs);
  bool saves_after_batch(int64_t batch) const;  // any callback's

 private:
  Callbacks callbacks_;
};

// A callback's save_freq / update_freq: "epoch" gives 0, a positive number of batches itself;
// anything else is an InvalidArgumentError naming `what` ("BackupAndRestore: save_freq").
using BatchFrequency = std::variant<std::string, int64_t>;
int64_t batches_or_epoch(const BatchFrequency& frequency, const std::string& what);

}  // namespace est::keras
