// Each hook on its own or inside a short training run: StopAtStepHook, LoggingTensorHook,
// StepCounterHook (fake clock), NanTensorHook (fail and stop), CheckpointSaverListener
// (before/after save, stop on true), ProfilerHook (Chrome trace), FinalOpsHook, fetches by
// name, and the early-stopping hooks reading eval event files.
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "checkpoint/reader.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

int64_t global_step_of(const Estimator& estimator) {
  return static_cast<int64_t>(estimator.get_variable_value("global_step").item());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class CountingListener : public CheckpointSaverListener {
 public:
  explicit CountingListener(int stop_after_saves = -1) : stop_after_(stop_after_saves) {}
  void begin() override { ++begins; }
  void before_save(Session&, int64_t step) override { before.push_back(step); }
  bool after_save(Session&, int64_t step) override {
    after.push_back(step);
    return static_cast<int>(after.size()) == stop_after_;
  }
  void end(Session&, int64_t step) override { end_step = step; }
  int begins = 0;
  std::vector<int64_t> before, after;
  int64_t end_step = -1;

 private:
  int stop_after_;
};

// Records what it fetched by name at each step.
class FetchHook : public SessionRunHook {
 public:
  SessionRunArgs before_run(SessionRunContext&) override {
    return {.fetches = {"loss", "global_step", "dense/bias"},
            .tensors = {{"mine", Tensor::scalar(7.0)}}};
  }
  void after_run(SessionRunContext& run_context, const SessionRunValues& values) override {
    steps_before.push_back(static_cast<int64_t>(values.results.at("global_step").item()));
    steps_after.push_back(values.global_step);
    losses.push_back(values.results.at("loss").item());
    spec_losses.push_back(run_context.spec().loss.item());
    mine = values.results.at("mine").item();
    bias_shape = values.results.at("dense/bias").shape();
  }
  std::vector<int64_t> steps_before, steps_after;
  std::vector<double> losses, spec_losses;
  double mine = 0;
  Shape bias_shape;
};

}  // namespace

TEST_CASE("StopAtStepHook: exactly one of num_steps and last_step") {
  CHECK_THROWS_AS(hooks::StopAtStepHook(std::nullopt, std::nullopt), InvalidArgumentError);
  CHECK_THROWS_AS(hooks::StopAtStepHook(3, 5), InvalidArgumentError);
  CHECK_THROWS_AS(hooks::StopAtStepHook(0, std::nullopt), InvalidArgumentError);
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto stop = std::make_shared<hooks::StopAtStepHook>(std::nullopt, 4);
  estimator.train(linear_input_fn(64, 4, false, -1), {.hooks = {stop}});
  CHECK(global_step_of(estimator) == 4);
}

TEST_CASE("hooks fetch loss, global_step (before the step), variables and their own tensors") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto fetch = std::make_shared<FetchHook>();
  estimator.train(linear_input_fn(64, 4, false, -1), {.hooks = {fetch}, .steps = 3});
  CHECK(fetch->steps_before == std::vector<int64_t>{0, 1, 2});
  CHECK(fetch->steps_after == std::vector<int64_t>{1, 2, 3});
  CHECK(fetch->losses == fetch->spec_losses);
  CHECK(fetch->mine == 7.0);
  CHECK(fetch->bias_shape == Shape{1});

  class BadFetch : public SessionRunHook {
    SessionRunArgs before_run(SessionRunContext&) override { return {.fetches = {"nope"}}; }
  };
  CHECK_THROWS_WITH_AS(estimator.train(linear_input_fn(64, 4, false, -1),
                                       {.hooks = {std::make_shared<BadFetch>()}, .steps = 1}),
                       doctest::Contains("'nope'"), NotFoundError);
}

TEST_CASE("LoggingTensorHook logs the named tensors every N iterations and at the end") {
  TempDir dir;
  LogCapture log;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto hook = std::make_shared<hooks::LoggingTensorHook>(
      hooks::LoggingTensorHook::Entries{{"bias", "dense/bias"}, {"gs", "global_step"}}, 2,
      std::nullopt, true);
  estimator.train(linear_input_fn(64, 4, false, -1), {.hooks = {hook}, .steps = 5});
  CHECK(log.count("bias = ") == 4);  // iterations 0, 2, 4 and the end
  CHECK(log.count(", gs = 0") == 1);
  CHECK(log.count(", gs = 2 (") == 1);
  CHECK(log.count(", gs = 4 (") == 1);
  CHECK(log.count(", gs = 4") == 2);  // the end line repeats the last values
  CHECK_THROWS_AS(hooks::LoggingTensorHook(hooks::LoggingTensorHook::Entries{}, 1),
                  InvalidArgumentError);
}

TEST_CASE("StepCounterHook logs global_step/sec from the clock") {
  TempDir dir;
  LogCapture log;
  FakeClock clock;
  RunConfig config = quiet_config(dir.str());
  config.clock = clock.clock();
  config.log_step_count_steps = 4;
  Estimator estimator(linear_model_fn, config);
  // 0.5 fake seconds per step: 4 steps take 2 s, i.e. 2 steps/sec.
  estimator.train(linear_input_fn(64, 4, false, -1),
                  {.hooks = {std::make_shared<AdvanceClockHook>(clock, 0.5)}, .steps = 9});
  CHECK(log.count("global_step/sec: 2") == 2);  // at steps 5 and 9
  auto scalars = scalars_in(dir.str());
  CHECK(steps_of(scalars, "global_step/sec") == std::vector<int64_t>{5, 9});
  for (const Scalar& s : scalars)
    if (s.tag == "global_step/sec") CHECK(s.value == doctest::Approx(2.0));
}

TEST_CASE("NanTensorHook: fails naming the step, or stops with fail_on_nan_loss = false") {
  nn::VariableStore store;
  RunConfig config;
  Session session(store, ModeKeys::kTrain, "/tmp/m", config);
  EstimatorSpec spec = EstimatorSpec::eval(Tensor::scalar(std::nan("")));
  StepTimings timings;
  SessionRunValues values{.results = {{"loss", spec.loss}}, .global_step = 8};
  {
    SessionRunContext context(session, spec, 7, timings);
    hooks::NanTensorHook failing;
    CHECK(failing.before_run(context).fetches == std::vector<std::string>{"loss"});
    CHECK_THROWS_WITH_AS(failing.after_run(context, values), doctest::Contains("at global step 7"),
                         NanLossDuringTrainingError);
  }
  {
    LogCapture log;
    SessionRunContext context(session, spec, 7, timings);
    hooks::NanTensorHook stopping("loss", false);
    stopping.after_run(context, values);
    CHECK(context.stop_requested());
    CHECK(log.contains("Model diverged with loss = nan"));
  }
  {
    SessionRunContext context(session, spec, 7, timings);
    SessionRunValues finite{.results = {{"loss", Tensor::scalar(1.5)}}, .global_step = 8};
    hooks::NanTensorHook checking;
    checking.after_run(context, finite);
    CHECK_FALSE(context.stop_requested());
  }
}

TEST_CASE("CheckpointSaverListener: before/after each save, end; after_save true stops") {
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  config.save_checkpoints_steps = 3;
  auto listener = std::make_shared<CountingListener>();
  Estimator estimator(linear_model_fn, config);
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 7, .saving_listeners = {listener}});
  CHECK(listener->begins == 1);
  CHECK(listener->before == std::vector<int64_t>{0, 3, 6, 7});
  CHECK(listener->after == std::vector<int64_t>{0, 3, 6, 7});
  CHECK(listener->end_step == 7);

  TempDir other;
  config.model_dir = other.str();
  auto stopper = std::make_shared<CountingListener>(2);  // stop after the save at step 3
  Estimator stopped(linear_model_fn, config);
  stopped.train(linear_input_fn(64, 4, false, -1), {.steps = 100, .saving_listeners = {stopper}});
  CHECK(global_step_of(stopped) == 3);
  CHECK(stopper->after == std::vector<int64_t>{0, 3});
}

TEST_CASE("CheckpointSaverHook names a checkpoint after the global_step it holds") {
  // As under parameter servers: the step the chief saw (the store's) trails the global_step
  // read with the variables (another worker's update landed in between).
  TempDir dir;
  RunConfig config = quiet_config(dir.str());
  nn::VariableStore store;
  Tensor step;
  {
    ops::NoGradGuard no_grad;
    step = nn::get_or_create_global_step(store);
    step.data<int64_t>()[0] = 5;
  }
  int64_t held = 6;  // what the variables' read gives
  Session session(store, ModeKeys::kTrain, dir.str(), config, [&] {
    checkpoint::TensorBundle bundle;
    bundle.add_variable("global_step", Tensor::scalar(static_cast<double>(held), DType::kI64),
                        false);
    bundle.global_step = held;
    return bundle;
  });
  auto listener = std::make_shared<CountingListener>();
  hooks::CheckpointSaverHook hook(
      {.checkpoint_dir = dir.str(), .save_steps = 1, .listeners = {listener}});
  hook.begin();
  hook.after_create_session(session);
  EstimatorSpec spec = EstimatorSpec::eval(Tensor::scalar(1.0));
  StepTimings timings;
  SessionRunContext context(session, spec, 5, timings);
  held = 8;
  hook.after_run(context, SessionRunValues{.results = {}, .global_step = 7});
  step.data<int64_t>()[0] = 8;  // the read wrote the fresh step into the store
  hook.end(session);
  CHECK(hook.saved() == std::vector<std::string>{dir / "model.ckpt-6.h5", dir / "model.ckpt-8.h5"});
  CHECK(checkpoint::read_info(dir / "model.ckpt-8.h5").global_step == 8);
  CHECK(listener->after == std::vector<int64_t>{6, 8});
  CHECK(listener->end_step == 8);
}

TEST_CASE("ProfilerHook writes Chrome traces of the step phases") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto profiler = std::make_shared<hooks::ProfilerHook>(4, std::nullopt, dir / "profile");
  estimator.train(linear_input_fn(64, 4, false, -1), {.hooks = {profiler}, .steps = 10});
  REQUIRE(profiler->written() == std::vector<std::string>{dir / "profile/timeline-5.json",
                                                          dir / "profile/timeline-9.json",
                                                          dir / "profile/timeline-10.json"});
  // The Trace Event Format's JSON Object Format: {"traceEvents": [...], "displayTimeUnit"},
  // every event complete ("ph": "X") with name, cat, pid, tid, ts and dur in microseconds.
  auto phases = [&](const std::string& file) {
    nlohmann::json trace = nlohmann::json::parse(read_file(dir / ("profile/" + file)));
    REQUIRE(trace.is_object());
    CHECK(trace.at("displayTimeUnit") == "ms");
    const nlohmann::json& events = trace.at("traceEvents");
    REQUIRE(events.is_array());
    std::map<std::string, int> count;
    std::map<int64_t, std::vector<std::string>> names_by_step;
    double previous_ts = -1;
    for (const nlohmann::json& event : events) {
      CHECK(event.at("ph") == "X");
      CHECK(event.at("cat") == "step");
      CHECK(event.at("pid").is_number_integer());
      CHECK(event.at("tid").is_number_integer());
      REQUIRE(event.at("ts").is_number());
      REQUIRE(event.at("dur").is_number());
      CHECK(event.at("dur").get<double>() >= 0);
      // Phases in order, none overlapping (1 ns of slack for the rounding of ts + dur).
      CHECK(event.at("ts").get<double>() >= previous_ts - 1e-3);
      previous_ts = event.at("ts").get<double>() + event.at("dur").get<double>();
      const std::string name = event.at("name").get<std::string>();
      ++count[name];
      names_by_step[event.at("args").at("global_step").get<int64_t>()].push_back(name);
    }
    return std::pair(count, names_by_step);
  };
  auto [count, names_by_step] = phases("timeline-9.json");  // steps 6..9
  CHECK(count["input"] == 4);
  CHECK(count["model_fn"] == 4);
  CHECK(count["backward+update"] == 4);
  REQUIRE(names_by_step.count(7) == 1);
  // Step 7: input, model_fn, the hooks' before_run, the train op, then (when the clock moved)
  // the after_run hooks up to step 8's input.
  std::vector<std::string> step_7 = names_by_step[7];
  if (step_7.size() == 5) CHECK(step_7.back() == "hooks");
  step_7.resize(4);
  CHECK(step_7 == std::vector<std::string>{"input", "model_fn", "hooks", "backward+update"});
  CHECK(phases("timeline-5.json").first["model_fn"] == 5);
  CHECK_THROWS_AS(hooks::ProfilerHook(std::nullopt, std::nullopt, dir.str()), InvalidArgumentError);
}

TEST_CASE("FinalOpsHook reads variables when the loop ends") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  auto final_ops =
      std::make_shared<hooks::FinalOpsHook>(std::vector<std::string>{"global_step", "dense/bias"});
  estimator.train(linear_input_fn(64, 4, false, -1), {.hooks = {final_ops}, .steps = 6});
  CHECK(final_ops->final_ops_values().at("global_step").item() == 6);
  CHECK(final_ops->final_ops_values().at("dense/bias").to_vector<float>() ==
        estimator.get_variable_value("dense/bias").to_vector<float>());
}

TEST_CASE("early stopping hooks read the evaluations in the eval directory") {
  TempDir dir;
  Estimator estimator(linear_model_fn, quiet_config(dir.str()));
  {
    SummaryWriter writer(estimator.eval_dir());
    double losses[] = {1.0, 0.9, 0.95, 0.97};
    for (int i = 0; i < 4; ++i) writer.add_scalar("loss", losses[i], 10 * (i + 1));
    writer.add_scalar("accuracy", 0.8, 40);
  }
  auto metrics = read_eval_metrics(estimator.eval_dir());
  REQUIRE(metrics.size() == 4);
  CHECK(metrics.at(20).at("loss") == doctest::Approx(0.9));
  CHECK(metrics.at(40).at("accuracy") == doctest::Approx(0.8));

  hooks::EarlyStoppingOptions every_step{.run_every_secs = std::nullopt, .run_every_steps = 1};
  auto run = [&](std::shared_ptr<SessionRunHook> hook) {
    TempDir train_dir;
    Estimator trainer(linear_model_fn, quiet_config(train_dir.str()));
    trainer.train(linear_input_fn(64, 4, false, -1), {.hooks = {std::move(hook)}, .steps = 6});
    return global_step_of(trainer);
  };
  // Best loss at step 20; step 40 is 20 steps later.
  CHECK(run(hooks::stop_if_no_decrease_hook(estimator, "loss", 20, every_step)) == 2);
  CHECK(run(hooks::stop_if_no_decrease_hook(estimator, "loss", 21, every_step)) == 6);
  CHECK(run(hooks::stop_if_no_increase_hook(estimator, "loss", 30, every_step)) == 2);
  CHECK(run(hooks::stop_if_higher_hook(estimator, "loss", 0.99, every_step)) == 2);
  CHECK(run(hooks::stop_if_higher_hook(estimator, "loss", 1.0, every_step)) == 6);
  CHECK(run(hooks::stop_if_lower_hook(estimator, "loss", 0.89, every_step)) == 6);
  CHECK(run(hooks::stop_if_lower_hook(estimator, "loss", 0.91, every_step)) == 2);
  hooks::EarlyStoppingOptions late = every_step;
  late.min_steps = 30;  // only steps 30 and 40 count: the best is 0.95 at 30
  CHECK(run(hooks::stop_if_no_decrease_hook(estimator, "loss", 10, late)) == 2);
  CHECK(run(hooks::stop_if_no_decrease_hook(estimator, "loss", 11, late)) == 6);
  CHECK_THROWS_WITH_AS(run(hooks::stop_if_higher_hook(estimator, "auc", 0.5, every_step)),
                       doctest::Contains("'auc'"), NotFoundError);
}

TEST_CASE("hooks a spec carries (training, chief, evaluation, prediction) join the loop") {
  struct Counter : SessionRunHook {
    void begin() override { ++begins; }
    void after_create_session(Session& session) override { mode = session.mode(); }
    void after_run(SessionRunContext&, const SessionRunValues&) override { ++runs; }
    void end(Session&) override { ++ends; }
    int begins = 0, runs = 0, ends = 0;
    ModeKeys mode = ModeKeys::kTrain;
  };
  auto training = std::make_shared<Counter>(), chief = std::make_shared<Counter>(),
       evaluation = std::make_shared<Counter>(), prediction = std::make_shared<Counter>();
  auto model_fn = [&](const Features& f, const Tensor& labels, ModeKeys mode, ModelContext& ctx) {
    EstimatorSpec spec = linear_model_fn(f, labels, mode, ctx);
    spec.training_hooks = {training};
    spec.training_chief_hooks = {chief};
    spec.evaluation_hooks = {evaluation};
    spec.prediction_hooks = {prediction};
    return spec;
  };
  TempDir dir;
  Estimator estimator(model_fn, quiet_config(dir.str()));
  estimator.train(linear_input_fn(64, 4, false, -1), {.steps = 5});
  estimator.evaluate(linear_input_fn(12, 4));
  estimator.predict(linear_input_fn(8, 4));
  CHECK((training->begins == 1 && training->runs == 5 && training->ends == 1));
  CHECK((chief->begins == 1 && chief->runs == 5 && chief->ends == 1));
  CHECK((evaluation->begins == 1 && evaluation->runs == 3 && evaluation->ends == 1));
  CHECK(evaluation->mode == ModeKeys::kEval);
  CHECK((prediction->begins == 1 && prediction->runs == 2 && prediction->ends == 1));
  CHECK(prediction->mode == ModeKeys::kPredict);
}
