// Exporters: what train_and_evaluate does with the model after each evaluation
// (tf.estimator.Exporter, exporter.py). Each writes Estimator::export_saved_model's layout under
// model_dir/export/<name>/<timestamp>/ for the evaluated checkpoint:
//   LatestExporter  every time, keeping the newest `exports_to_keep`;
//   BestExporter    when compare_fn(best, current) says the evaluation beats the best so far
//                   (the best is first read back from the evaluation's event files, so a restarted
//                   job remembers it; default: lower "loss"), keeping the newest exports;
//   FinalExporter   once, after the final evaluation.
// exports_to_keep unset keeps every export; otherwise it must be positive (TF's ValueError is an
// InvalidArgumentError here). Only directories named by ten digits are ever deleted.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "estimator/estimator.h"

namespace est {

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual std::string name() const = 0;
  // Exports the model of `checkpoint_path` under `export_path` (model_dir/export/<name>);
  // returns the directory written, or nullopt when this exporter skipped the call.
  virtual std::optional<std::string> export_model(const Estimator& estimator,
                                                  const std::string& export_path,
                                                  const std::string& checkpoint_path,
                                                  const Metrics& eval_result,
                                                  bool is_the_final_export) = 0;
};

// The arguments every exporter passes to export_saved_model.
struct SavedModelExport {
  std::string name;
  ServingInputReceiverFn serving_input_receiver_fn;
  std::map<std::string, std::string> assets_extra;  // destination -> source path

  std::string run(const Estimator& estimator, const std::string& export_path,
                  const std::string& checkpoint_path) const;
};

class LatestExporter : public Exporter {
 public:
  LatestExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
                 std::map<std::string, std::string> assets_extra = {},
                 std::optional<int> exports_to_keep = 5);
  std::string name() const override { return export_.name; }
  std::optional<std::string> export_model(const Estimator& estimator,
                                          const std::string& export_path,
                                          const std::string& checkpoint_path,
                                          const Metrics& eval_result,
                                          bool is_the_final_export) override;

 private:
  SavedModelExport export_;
  std::optional<int> exports_to_keep_;
};

// compare_fn(best_eval_result, current_eval_result): true when current is better.
using CompareFn = std::function<bool(const Metrics& best, const Metrics& current)>;
// TF's default: the lower "loss" (InvalidArgumentError when either result lacks one).
bool loss_smaller(const Metrics& best_eval_result, const Metrics& current_eval_result);

class BestExporter : public Exporter {
 public:
  // event_file_pattern: relative to model_dir, a directory then a file-name glob; empty: the
  // best starts unknown instead of being read back.
  BestExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
               std::string event_file_pattern = "eval/*.tfevents.*",
               CompareFn compare_fn = loss_smaller,
               std::map<std::string, std::string> assets_extra = {},
               std::optional<int> exports_to_keep = 5);
  std::string name() const override { return export_.name; }
  std::optional<std::string> export_model(const Estimator& estimator,
                                          const std::string& export_path,
                                          const std::string& checkpoint_path,
                                          const Metrics& eval_result,
                                          bool is_the_final_export) override;

 private:
  std::optional<Metrics> best_in_event_files(const std::string& model_dir) const;

  SavedModelExport export_;
  std::string event_file_pattern_;
  CompareFn compare_fn_;
  std::optional<int> exports_to_keep_;
  std::optional<std::string> model_dir_;  // whose event files were read
  std::optional<Metrics> best_eval_result_;
  bool has_exported_ = false;
};

class FinalExporter : public Exporter {
 public:
  FinalExporter(std::string name, ServingInputReceiverFn serving_input_receiver_fn,
                std::map<std::string, std::string> assets_extra = {});
  std::string name() const override { return export_.name; }
  std::optional<std::string> export_model(const Estimator& estimator,
                                          const std::string& export_path,
                                          const std::string& checkpoint_path,
                                          const Metrics& eval_result,
                                          bool is_the_final_export) override;

 private:
  SavedModelExport export_;
};

}  // namespace est
