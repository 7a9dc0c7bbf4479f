// A background save taken after step N while steps N+1, N+2, ... update the variables in place
// writes exactly the values of step N: every checkpoint of a run saving after each step equals,
// bit for bit, the last checkpoint of a run that stopped at that step (nothing after it could
// touch the values being written). Guards the asynchronous save (issue 32, item 5: a snapshot
// that stops deep-copying must keep this).
#include "checkpoint/reader.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

// 2 -> 1024 -> 1024 -> 1 with Adam: about 4 MB of kernel and twice that of slots, so a save is
// still being written while the next steps update them.
EstimatorSpec wide_model_fn(const Features& features, const Tensor& labels, ModeKeys,
                            ModelContext& ctx) {
  using namespace est::nn;
  Tensor hidden = dense(ctx, features.at("x"), {.units = 1024, .activation = est::nn::relu});
  hidden = dense(ctx, hidden, {.units = 1024, .activation = est::nn::relu});
  Tensor loss = mean_squared_error(labels, dense(ctx, hidden, {.units = 1}));
  return EstimatorSpec::train(loss, optim::adam(1e-3).minimize(loss, ctx));
}

RunConfig config_for(const std::string& dir, int64_t save_every) {
  RunConfig config = quiet_config(dir);
  config.save_checkpoints_steps = save_every;
  return config;
}

}  // namespace

TEST_CASE("a save in flight while later steps update the variables holds its own step's values") {
  constexpr int64_t kSteps = 6;
  TempDir every_step;
  Estimator(wide_model_fn, config_for(every_step.str(), 1))
      .train(linear_input_fn(64, 8, false, -1), {.max_steps = kSteps});
  for (int64_t step : {1, 3, 5}) {
    TempDir stopped;
    Estimator(wide_model_fn, config_for(stopped.str(), 1000))
        .train(linear_input_fn(64, 8, false, -1), {.max_steps = step});
    const std::string name = "/model.ckpt-" + std::to_string(step) + ".h5";
    checkpoint::TensorBundle in_flight = checkpoint::load(every_step.str() + name);
    checkpoint::TensorBundle reference = checkpoint::load(stopped.str() + name);
    CHECK(in_flight.global_step == step);
    REQUIRE(in_flight.tensors.size() == reference.tensors.size());
    for (size_t i = 0; i < reference.tensors.size(); ++i) {
      CAPTURE(reference.tensors[i].name);
      CHECK(in_flight.tensors[i].name == reference.tensors[i].name);
      CHECK(in_flight.tensors[i].value.to_vector<double>() ==
            reference.tensors[i].value.to_vector<double>());
    }
  }
}
