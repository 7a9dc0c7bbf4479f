// Exporter: what train_and_evaluate does with a model after each evaluation (tf.estimator
// Exporter). There is no SavedModel format here; LatestExporter keeps copies of the evaluated
// checkpoint under model_dir/export/<name>/<timestamp>/, the newest `exports_to_keep` of them.
#pragma once

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

class LatestExporter : public Exporter {
 public:
  explicit LatestExporter(std::string name, int exports_to_keep = 5);
  std::string name() const override { return name_; }
  std::optional<std::string> export_model(const Estimator& estimator,
                                          const std::string& export_path,
                                          const std::string& checkpoint_path,
                                          const Metrics& eval_result,
                                          bool is_the_final_export) override;

 private:
  std::string name_;
  int exports_to_keep_;  // 0 keeps all
};

}  // namespace est
