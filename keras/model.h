// keras.Model and keras.Sequential (Keras 2.x: keras/engine/functional.py, sequential.py,
// training.py): a graph of layers, its summary, and compile / fit / evaluate / predict.
//
// A Model is a graph of Nodes from its Input tensors to its outputs (model.cpp). Sequential is a
// Model whose graph is its list of layers, built when its input shape is known (an InputLayer
// first, build(shape), or the first batch). call() runs the nodes in order on real tensors
// through an nn::ModelContext, so variables are the layers' (`conv2d/kernel`).
//
// Training runs on the Estimator (training.cpp): compile() makes a model_fn from the graph, the
// loss, the optimizer and the metrics, and an est::Estimator over a model directory that holds
// the model's state between calls (RunConfig::model_dir; a temporary directory by default). fit
// is one Estimator::train over all its epochs (cut into epochs by step count, fit_loop.h; a
// second one only after an epoch resumed mid-way by BackupAndRestore), continuing from the latest
// checkpoint (variables, optimizer slots, RNG states, input position), and evaluate and predict are
// Estimator::evaluate / predict on the latest checkpoint. fit's first step is thus exactly an
// Estimator step of the same model_fn and seed. This is how the rest plugs in:
// - strategies: `model.config().train_distribute = strategy;` before compile() is
//   `with strategy.scope():`. The dataset yields GLOBAL batches, split over the replicas and
//   auto-sharded over the workers as Keras does (distributed_input.h: a batch that does not divide
//   gives the first replicas one row more); the loss scaling is Keras's and the Estimator's (each
//   replica's mean, gradients / replicas in sync: on equal batches Keras's sum over the global
//   batch / global batch size); logged loss and metrics are summed over every replica and worker;
//   only the chief prints. Under several workers every worker must see config().model_dir (as
//   for an Estimator) when fit validates, since the next epochs resume from the chief's
//   checkpoint. evaluate and predict run in the process without the strategy;
// - callbacks: Callback (callbacks.h) sees each batch through a SessionRunHook and each epoch;
//   with callbacks, fit saves a checkpoint at every epoch's end before on_epoch_end, so
//   BackupAndRestore / ModelCheckpoint can read the epoch's state in model_dir; they read the
//   state after a batch through training_session(), set where fit starts (resume_from:
//   BackupAndRestore; the resumed epoch runs only its remaining steps, in a train() of its own)
//   and the learning rate (set_learning_rate: LearningRateScheduler, ReduceLROnPlateau; fit's
//   hook writes it into the variable "learning_rate" before every step). fit trains on through
//   a NaN loss, as Keras does (TerminateOnNaN stops it);
// - weights and saving (weights.cpp, saving.cpp, saving_h5.cpp): get/set_weights, save and
//   load_model read and write model_dir's latest checkpoint (during fit, the running session's
//   variables); each layer's config_json() and the compile options give the Keras config
//   (serialization.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/bundle.h"
#include "data/dataset.h"
#include "estimator/run_config.h"
#include "keras/callbacks.h"
#include "keras/compile.h"
#include "keras/data_adapter.h"
#include "keras/layers.h"

namespace est {
class Estimator;
class Session;
}  // namespace est

namespace est::keras {

// Model.compile's arguments; with several outputs, loss, loss_weights and metrics take Keras's
// per-output structures (compile.h, "compile()'s per-output structures").
struct CompileOptions {
  std::variant<std::string, Optimizer> optimizer = std::string("rmsprop");
  std::variant<std::string, Loss, LossList, LossMap> loss;
  std::variant<std::monostate, LossWeightList, LossWeightMap> loss_weights;
  CompileMetrics metrics;
};

struct FitOptions {
  int epochs = 1;
  std::optional<int64_t> steps_per_epoch;  // required for an infinite (repeated) dataset
  std::optional<data::Dataset> validation_data;
  std::optional<int64_t> validation_steps;  // unset: the whole validation set
  int validation_freq = 1;
  int initial_epoch = 0;
  Callbacks callbacks;
  int verbose = 1;  // Keras's 'auto': 1
  // Where the progress goes (default: stdout).
  std::optional<ProgbarOutput> output;
  // Only for fit(x, y) on tensors, as Keras allows them only for arrays: the batch size, the
  // fraction of the rows (the LAST ones, before any shuffling) held out as validation data, and
  // whether the training rows are shuffled afresh every epoch.
  int64_t batch_size = 32;
  double validation_split = 0.0;
  bool shuffle = true;
};

struct EvaluateOptions {
  std::optional<int64_t> steps;
  int verbose = 1;
  std::optional<ProgbarOutput> output;
};

class StepStatistics;
class CompiledLossesAndMetrics;

class Model {
 public:
  // The functional API: Model(inputs, outputs).
  Model(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs, std::string name = {});
  Model(KerasTensor input, KerasTensor output, std::string name = {});
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  // The layers in order (Sequential: without its InputLayer; functional: inputs included).
  virtual std::vector<LayerPtr> layers() const;
  bool built() const { return !nodes_.empty(); }
  // Every weight: "conv2d/kernel", shape, trainable (Keras's model.weights order).
  std::vector<std::pair<std::string, WeightSpec>> weights() const;
  int64_t count_params() const;
  // The Keras 2.x table (layer_utils.print_summary): to `print` line by line (default stdout).
  std::string summary() const;

  // Runs the graph on real inputs (batch first), in the order of the model's inputs.
  // InvalidArgumentError when an input's shape does not match its Input's.
  std::vector<Tensor> call(nn::ModelContext& ctx, const std::vector<Tensor>& inputs) const;
  // Keras's model.losses after call() in the same ctx: each layer's regularization penalties
  // (layers::DenseOptions' kernel_regularizer, bias_regularizer), in layer order.
  std::vector<Tensor> regularization_losses(nn::ModelContext& ctx) const;

  // The Estimator settings fit/evaluate/predict use (model_dir, tf_random_seed, strategies);
  // set them before compile(). Without a model_dir, training keeps its checkpoints in a
  // temporary directory that goes with the Model (a Keras model leaves no files behind); set
  // one to keep them.
  RunConfig& config() { return config_; }

  // InvalidArgumentError for an unknown loss or metric name; for a built model also for a
  // per-output structure that does not fit its outputs (else at the first fit or evaluate).
  void compile(CompileOptions options);
  // The dataset yields (x, y) batches: features keyed by the Input names and labels, or Keras's
  // structures of x and y for several inputs or outputs (keras::pack_x_y, data_adapter.h). The
  // logs are Keras's: "loss", "<output>_loss" per output with a loss (several outputs), the
  // metrics ("<output>_<metric>" with several outputs), and "val_" ones.
  History fit(const data::Dataset& dataset, FitOptions options = {});
  // "loss" and every metric, Keras's names (as fit's logs).
  std::map<std::string, double> evaluate(const data::Dataset& dataset,
                                         EvaluateOptions options = {});
  // fit / evaluate on tensors (Keras's NumPy arrays): x [N, ...] (one input) and y [N, ...],
  // batched by options.batch_size (evaluate: 32); fit's validation_split holds out the last rows.
  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  std::map<std::string, double> evaluate(const Tensor& x, const Tensor& y,
                                         EvaluateOptions options = {}, int64_t batch_size = 32);
  // The same for several inputs or outputs: x and y as Keras's structures (data_adapter.h: x by
  // Input name or in input order, y by output name, in output order, or one tensor for every
  // output), all with the same number of rows.
  History fit(XStructure x, YStructure y, FitOptions options = {});
  std::map<std::string, double> evaluate(XStructure x, YStructure y, EvaluateOptions options = {},
                                         int64_t batch_size = 32);
  // The outputs for every example, concatenated over batches (one tensor per output, in the
  // order of outputs()).
  std::vector<Tensor> predict(const data::Dataset& dataset, std::optional<int64_t> steps = {});

  // Set by a callback to end fit: after the current batch (on_train_batch_end, as Keras's
  // TerminateOnNaN) or the current epoch.
  bool stop_training = false;

  // The optimizer's learning rate (Keras's model.optimizer.learning_rate), for callbacks
  // (LearningRateScheduler, ReduceLROnPlateau): a new value takes effect from fit's next step
  // and is saved in the checkpoints with the state, as the float32 variable "learning_rate"
  // (Keras's optimizer variable). FailedPreconditionError before compile(); setting it when
  // the optimizer was given a schedule is an InvalidArgumentError, as in Keras.
  double learning_rate() const;
  void set_learning_rate(double learning_rate);

  // Where the next fit starts instead of initial_epoch (Keras 2.11+'s
  // _maybe_load_initial_counters_from_ckpt): BackupAndRestore sets it in on_train_begin after
  // putting its backup in place; `step` batches of that epoch are then skipped (they were run).
  struct InitialCounters {
    int epoch = 0;
    int64_t step = 0;
  };
  std::optional<InitialCounters> resume_from;
  // While fit trains: the running training session (set_training_session below; during
  // on_train_batch_end its checkpoint_bundle() is the state after that batch: variables,
  // slots, global step, RNG, input position); null otherwise.
  const est::Session* training_session() const { return training_session_; }

  // Weights (weights.cpp): the values of weights() in that order, read from / written to the
  // latest checkpoint in config().model_dir, so that fit, evaluate and predict continue from
  // them. Before any checkpoint, get_weights() initializes the variables as the first fit
  // would (same tf_random_seed) and writes them as the step-0 checkpoint.
  // InvalidArgumentError naming the weight when a count or shape does not match.
  std::vector<Tensor> get_weights();
  void set_weights(const std::vector<Tensor>& weights);
  // Keras 3's `.weights.h5` (saving_lib.save_weights_only): layers/<layer>/vars/<i>.
  void save_weights(const std::string& path);
  void load_weights(const std::string& path);
  // The whole model (saving.cpp): "x.keras" is Keras 3's zip archive, "x.h5" Keras 2's HDF5
  // file; both keep the config, the compile config, the weights and the optimizer state.
  void save(const std::string& path);

  // What saving reads.
  const std::vector<KerasTensor>& inputs() const { return inputs_; }
  const std::vector<KerasTensor>& outputs() const { return outputs_; }
  // Keras's model.input_names (the Input layers' names) and model.output_names (the output
  // layers' names, made unique as functional.py's _set_output_names does: a layer giving a
  // second output is "<name>_1"): the keys of y maps, per-output compile arguments, predict.
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  const std::optional<CompileOptions>& compile_options() const { return compile_options_; }
  const std::optional<Optimizer>& optimizer() const { return optimizer_; }
  // The model directory (a temporary one unless config().model_dir is set).
  std::string model_dir();
  // The latest checkpoint's tensors (variables, optimizer slots, global step), initializing
  // them as get_weights() says when there is none; and a new checkpoint from them.
  checkpoint::TensorBundle read_state();
  void write_state(const checkpoint::TensorBundle& state);
  // While fit trains, its hook sets the running session here (null after): read_state then
  // snapshots the live variables and set_weights assigns them, so callbacks that save or
  // restore mid-epoch see the weights as they are, not the last checkpoint.
  void set_training_session(est::Session* session) { training_session_ = session; }
  // Whether this is a Sequential model (saved as class "Sequential").
  virtual bool is_sequential() const { return false; }

 protected:
  explicit Model(std::string name);
  // Graph from inputs to outputs: nodes in the order they run.
  void set_graph(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs);
  // Whether summary() prints without "Connected to".
  virtual bool sequential_like() const;
  // Sequential: builds from the first batch's feature shape.
  virtual void build_from_batch(const Shape& /*feature_shape*/) {}

 private:
  std::vector<Tensor> inputs_of(const data::Features& features) const;
  // fit / evaluate on tensors (keras/arrays.cpp): (x, y) as one element of whole tensors.
  History fit_rows(const data::Element& xy, FitOptions options);
  std::map<std::string, double> evaluate_rows(const data::Element& xy, EvaluateOptions options,
                                              int64_t batch_size);
  // compile()'s losses and metrics for the built model's outputs (made at the first use after
  // compile, or by compile when the model is built).
  const CompiledLossesAndMetrics& compiled();
  // The Estimator over config() (built on first use; evaluate and predict take whichever exists).
  est::Estimator& estimator();
  // fit's: one saving every `save_steps` steps (its epoch ends) instead of config()'s cadence,
  // or on config()'s cadence (unset); rebuilt when the one there saves otherwise.
  est::Estimator& training_estimator(std::optional<int64_t> save_steps);
  void check_compiled(const char* what) const;
  std::vector<std::string> metric_names_with_loss();
  void ensure_built(const data::Dataset& dataset);

  std::string name_;
  std::vector<KerasTensor> inputs_;
  std::vector<KerasTensor> outputs_;
  std::vector<std::shared_ptr<const Node>> nodes_;  // run order
  RunConfig config_;
  std::optional<Optimizer> optimizer_;
  std::optional<CompileOptions> compile_options_;
  std::shared_ptr<const CompiledLossesAndMetrics> compiled_;
  est::Session* training_session_ = nullptr;
  std::unique_ptr<est::Estimator> estimator_;
  // The model_dir the Estimator made because none was set; removed with the Model.
  std::string temporary_model_dir_;
  // While fit runs: where the training model_fn records each replica's loss and metrics.
  std::shared_ptr<StepStatistics> step_statistics_;
  std::shared_ptr<double> learning_rate_;  // null for a schedule; see set_learning_rate
};

class Sequential : public Model {
 public:
  explicit Sequential(std::vector<LayerPtr> layers = {}, std::string name = {});
  void add(LayerPtr layer);
  // Builds the graph for inputs of `input_shape` (without the batch dimension).
  void build(const Shape& input_shape);
  std::vector<LayerPtr> layers() const override;
  bool is_sequential() const override { return true; }

 protected:
  bool sequential_like() const override { return true; }
  void build_from_batch(const Shape& feature_shape) override;

 private:
  std::vector<LayerPtr> layers_;
};

// keras.models.load_model (saving.cpp): a ".keras" archive or a ".h5" file rebuilt from its
// config, compiled from its compile/training config, with its weights and optimizer state,
// so that fit continues where the saved model stopped. NotFoundError for a missing file;
// DataLossError naming the file and what is wrong for a damaged one; InvalidArgumentError
// naming an unknown layer class.
std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace est::keras
