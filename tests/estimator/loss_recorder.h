// A hook that records the loss of every training step, for tests that compare losses.
#pragma once

#include <memory>
#include <vector>

#include "estimator/hooks/session_run_hook.h"

namespace est_test {

class LossRecorder : public est::SessionRunHook {
 public:
  explicit LossRecorder(std::shared_ptr<std::vector<double>> losses) : losses_(std::move(losses)) {}
  est::SessionRunArgs before_run(est::SessionRunContext&) override { return {.fetches = {"loss"}}; }
  void after_run(est::SessionRunContext&, const est::SessionRunValues& values) override {
    losses_->push_back(values.results.at("loss").item());
  }

 private:
  std::shared_ptr<std::vector<double>> losses_;
};

}  // namespace est_test
