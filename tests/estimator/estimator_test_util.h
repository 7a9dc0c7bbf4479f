// Shared pieces of the estimator tests: temporary directories, captured log lines, a fake
// clock, and a tiny linear model on a synthetic in-memory dataset, so each test trains in
// milliseconds and can recompute the model's outputs by hand from its variables.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "estimator/estimator.h"
#include "estimator/event_reader.h"
#include "nn/nn.h"
#include "ops/logging.h"

namespace est_test {

namespace fs = std::filesystem;
using est::Tensor;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "est_core_test_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Captures every log line (INFO and up) while alive.
class LogCapture {
 public:
  LogCapture() {
    previous_level_ = est::log::level();
    est::log::set_level(est::log::Level::kInfo);
    previous_ = est::log::set_sink(
        [this](est::log::Level, std::string_view message) { lines_.emplace_back(message); });
  }
  ~LogCapture() {
    est::log::set_sink(previous_);
    est::log::set_level(previous_level_);
  }
  std::vector<std::string> lines() const { return lines_; }
  std::string text() const {
    std::string all;
    for (const std::string& line : lines_) all += line + "\n";
    return all;
  }
  bool contains(const std::string& text) const { return count(text) > 0; }
  int count(const std::string& text) const {
    int n = 0;
    for (const std::string& line : lines_)
      if (line.find(text) != std::string::npos) ++n;
    return n;
  }

 private:
  est::log::Sink previous_;
  est::log::Level previous_level_;
  std::vector<std::string> lines_;
};

struct FakeClock {
  std::shared_ptr<double> now = std::make_shared<double>(1000.0);
  est::Clock clock() const {
    return [now = now] { return *now; };
  }
  void advance(double seconds) const { *now += seconds; }
};

// Advances a fake clock after every step (placed before the Estimator's own hooks).
class AdvanceClockHook : public est::SessionRunHook {
 public:
  AdvanceClockHook(FakeClock clock, double seconds_per_step)
      : clock_(std::move(clock)), seconds_(seconds_per_step) {}
  void after_run(est::SessionRunContext&, const est::SessionRunValues&) override {
    clock_.advance(seconds_);
  }

 private:
  FakeClock clock_;
  double seconds_;
};

// Synthetic regression data: x = [(i % 7) / 7, (i % 3) / 3], y = 2 x0 - x1 + 0.5.
inline std::vector<float> feature_values(int64_t n) {
  std::vector<float> x;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(static_cast<float>(i % 7) / 7.0f);
    x.push_back(static_cast<float>(i % 3) / 3.0f);
  }
  return x;
}
inline std::vector<float> label_values(int64_t n) {
  std::vector<float> x = feature_values(n), y;
  for (int64_t i = 0; i < n; ++i) y.push_back(2 * x[2 * i] - x[2 * i + 1] + 0.5f);
  return y;
}

// `examples` rows in batches of `batch`, shuffled with a seed when `shuffle`, repeated
// `repeat` times (-1: forever).
inline est::InputFn linear_input_fn(int64_t examples = 64, int64_t batch = 8, bool shuffle = false,
                                    int64_t repeat = 1) {
  return [=](est::ModeKeys, const est::InputContext*) {
    Tensor x = Tensor::from_vector(feature_values(examples), {examples, 2});
    Tensor y = Tensor::from_vector(label_values(examples), {examples, 1});
    auto ds = est::data::Dataset::from_tensor_slices(est::Features{{"x", x}}, y);
    if (shuffle) ds = ds.shuffle(16, 7);
    if (repeat != 1) ds = ds.repeat(repeat);
    return ds.batch(batch);
  };
}

// dense(1) regression; "units" in params changes the layer width (to provoke mismatches);
// "nan_at_step" makes the loss NaN from that global step on.
inline est::EstimatorSpec linear_model_fn(const est::Features& features, const Tensor& labels,
                                          est::ModeKeys mode, est::ModelContext& ctx) {
  using namespace est::nn;
  const est::Params& params = est::params(ctx);
  int64_t units = params.get_int("units", 1);
  Tensor prediction = dense(ctx, features.at("x"), {.units = units});
  if (mode == est::ModeKeys::kPredict)
    return est::EstimatorSpec::predict(
        {{"y", prediction}, {"double_y", est::ops::mul(prediction, 2.0)}});
  Tensor loss = mean_squared_error(labels, prediction);
  if (params.contains("nan_at_step") && ctx.global_step() >= params.get_int("nan_at_step"))
    loss = est::ops::mul(loss, std::nan(""));
  if (mode == est::ModeKeys::kEval)
    return est::EstimatorSpec::eval(
        loss, {{"mae", est::metrics::mean_absolute_error(labels, prediction)},
               {"rmse", est::metrics::root_mean_squared_error(labels, prediction)}});
  return est::EstimatorSpec::train(loss, est::optim::sgd(0.1).minimize(loss, ctx));
}

inline est::RunConfig quiet_config(const std::string& model_dir) {
  return {.model_dir = model_dir,
          .tf_random_seed = 3,
          .save_summary_steps = 0,
          .save_checkpoints_steps = 1000,
          .save_checkpoints_secs = std::nullopt,
          .keep_checkpoint_max = 0,
          .log_step_count_steps = 1000};
}

inline std::vector<std::string> files_with_prefix(const std::string& dir,
                                                  const std::string& prefix) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Every scalar event of a directory's event files: (tag, step, value).
struct Scalar {
  std::string tag;
  int64_t step;
  double value;
};
inline std::vector<Scalar> scalars_in(const std::string& dir) {
  std::vector<Scalar> out;
  for (const std::string& file : files_with_prefix(dir, "events.out.tfevents."))
    for (const auto& event : est::read_events(file))
      if (!event.tag.empty()) out.push_back({event.tag, event.step, event.value});
  return out;
}

inline std::vector<int64_t> steps_of(const std::vector<Scalar>& scalars, const std::string& tag) {
  std::vector<int64_t> steps;
  for (const Scalar& s : scalars)
    if (s.tag == tag) steps.push_back(s.step);
  return steps;
}

}  // namespace est_test
