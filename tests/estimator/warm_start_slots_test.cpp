// WarmStartSettings through the Estimator: with the list form of vars_to_warm_start the
// optimizer's slots are warm-started too (TF's GLOBAL_VARIABLES), although the optimizer creates
// them only at its first update; the single regex leaves them fresh.
#include <doctest/doctest.h>

#include "estimator_test_util.h"

using namespace est_test;
using est::ModeKeys;

namespace {

est::EstimatorSpec adagrad_model_fn(const est::Features& features, const Tensor& labels,
                                    ModeKeys mode, est::ModelContext& ctx) {
  Tensor prediction = est::nn::dense(ctx, features.at("x"), {.units = 1});
  Tensor loss = est::nn::mean_squared_error(labels, prediction);
  return est::EstimatorSpec(
      {.mode = mode, .loss = loss, .train_op = est::optim::adagrad(0.1).minimize(loss, ctx)});
}

std::vector<float> values(const est::Estimator& estimator, const std::string& name) {
  return estimator.get_variable_value(name).to_vector<float>();
}

}  // namespace

TEST_CASE("warm start with a list of patterns carries the optimizer's slots over") {
  TempDir old_dir, with_slots_dir, without_slots_dir;
  est::Estimator old_model(adagrad_model_fn, quiet_config(old_dir.str()));
  old_model.train(linear_input_fn(64, 8, false, -1), {.steps = 20});
  std::vector<float> old_accumulator = values(old_model, "dense/kernel/Adagrad");

  LogCapture log;
  est::Estimator with_slots(
      adagrad_model_fn, quiet_config(with_slots_dir.str()), {},
      est::checkpoint::WarmStartSettings{.ckpt_to_initialize_from = old_dir.str(),
                                         .vars_to_warm_start = {"dense/"}});
  with_slots.train(linear_input_fn(64, 8, false, -1), {.steps = 1});
  est::Estimator without_slots(
      adagrad_model_fn, quiet_config(without_slots_dir.str()), {},
      est::checkpoint::WarmStartSettings{.ckpt_to_initialize_from = old_dir.str()});
  without_slots.train(linear_input_fn(64, 8, false, -1), {.steps = 1});

  // Both started from the old weights and took the same gradient; only the accumulators'
  // starting points differ: the old accumulator against Adagrad's initial 0.1.
  CHECK(values(with_slots, "dense/kernel") != values(without_slots, "dense/kernel"));
  std::vector<float> a = values(with_slots, "dense/kernel/Adagrad");
  std::vector<float> b = values(without_slots, "dense/kernel/Adagrad");
  REQUIRE(a.size() == old_accumulator.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(a[i] - b[i] == doctest::Approx(old_accumulator[i] - 0.1).epsilon(1e-5));
  // The warm start logged once (not once per replica), with the staged slots in one line.
  CHECK(log.count("Warm-starting from: " + old_dir.str()) == 2);  // one per estimator
  CHECK(log.count("Staged 2 checkpoint value(s)") == 1);
  // And the global step is not the old one: "dense/" does not select it.
  CHECK(with_slots.get_variable_value("global_step").item() == 1);
}
