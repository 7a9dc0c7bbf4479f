// The hooks' call sequence in evaluate and predict, pinned call by call as TF's MonitoredSession
// makes it (tensorflow/python/training/monitored_session.py): begin, after_create_session,
// before_run / after_run around each step (the caller's hooks, then the spec's), and end once
// when the loop ends normally (the input's end, `steps`, a hook's stop, predict's consumer);
// after an error from the input, end is not called (TF's __exit__ ends the hooks only without
// an exception, OutOfRangeError and StopIteration being its input's end).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "estimator_test_util.h"
#include "ops/error.h"

using namespace est;
using namespace est_test;

namespace {

using Calls = std::vector<std::string>;

// Appends "<name>:<call>" to a log shared by every hook of the run.
class RecordingHook : public SessionRunHook {
 public:
  RecordingHook(std::string name, std::shared_ptr<Calls> calls, int stop_after_runs = -1)
      : name_(std::move(name)), calls_(std::move(calls)), stop_after_runs_(stop_after_runs) {}
  void begin() override { record("begin"); }
  void after_create_session(Session&) override { record("after_create_session"); }
  SessionRunArgs before_run(SessionRunContext&) override {
    record("before_run");
    return {};
  }
  void after_run(SessionRunContext& run_context, const SessionRunValues&) override {
    record("after_run");
    if (++runs_ == stop_after_runs_) run_context.request_stop();
  }
  void end(Session&) override { record("end"); }

 private:
  void record(const char* call) { calls_->push_back(name_ + ":" + call); }
  std::string name_;
  std::shared_ptr<Calls> calls_;
  int stop_after_runs_;
  int runs_ = 0;
};

// "user:begin, spec:begin, ...", so that a failing check prints both sequences.
std::string joined(const Calls& calls) {
  std::string text;
  for (const std::string& call : calls) text += (text.empty() ? "" : ", ") + call;
  return text;
}

// The sequence of a loop of `steps` steps with the caller's hook "user" and the spec's "spec".
std::string expected(int steps, bool ended) {
  Calls calls = {"user:begin", "spec:begin", "user:after_create_session",
                 "spec:after_create_session"};
  for (int i = 0; i < steps; ++i)
    calls.insert(calls.end(),
                 {"user:before_run", "spec:before_run", "user:after_run", "spec:after_run"});
  if (ended) calls.insert(calls.end(), {"user:end", "spec:end"});
  return joined(calls);
}

// linear_input_fn's batches, the `fail_at`-th (from 1) failing with an InvalidArgumentError.
InputFn failing_input_fn(int64_t examples, int64_t batch, int fail_at) {
  return [=](ModeKeys mode, const InputContext* context) {
    auto count = std::make_shared<int>(0);
    return linear_input_fn(examples, batch)(mode, context).map([count, fail_at](data::Element e) {
      if (++*count == fail_at) throw InvalidArgumentError("record 2 is corrupt");
      return e;
    });
  };
}

struct Fixture {
  Fixture() {
    Estimator trainer(linear_model_fn, quiet_config(dir.str()));
    trainer.train(linear_input_fn(16, 4), {.steps = 2});
  }
  // An Estimator whose model_fn adds the "spec" hook to its evaluation and prediction hooks.
  Estimator estimator(int spec_stops_after_runs = -1) {
    auto spec_hook = std::make_shared<RecordingHook>("spec", calls, spec_stops_after_runs);
    auto model_fn = [spec_hook](const Features& f, const Tensor& labels, ModeKeys mode,
                                ModelContext& ctx) {
      EstimatorSpec spec = linear_model_fn(f, labels, mode, ctx);
      spec.evaluation_hooks = {spec_hook};
      spec.prediction_hooks = {spec_hook};
      return spec;
    };
    return Estimator(model_fn, quiet_config(dir.str()));
  }
  Hooks user_hooks() { return {std::make_shared<RecordingHook>("user", calls)}; }
  // `loop` (evaluate or predict, with user_hooks()) over an input whose second batch fails:
  // the error comes out after one step, and the hooks do not end.
  void check_input_error(const std::function<void(Estimator&, const InputFn&)>& loop) {
    Estimator failing = estimator();
    CHECK_THROWS_WITH_AS(loop(failing, failing_input_fn(12, 4, 2)),
                         doctest::Contains("record 2 is corrupt"), InvalidArgumentError);
    CHECK(joined(*calls) == expected(1, false));
  }

  TempDir dir;
  std::shared_ptr<Calls> calls = std::make_shared<Calls>();
};

}  // namespace

TEST_CASE("evaluate: begin, after_create_session, before/after_run per batch, end, in order") {
  Fixture fixture;
  SUBCASE("steps unset: until the input ends") {
    fixture.estimator().evaluate(linear_input_fn(12, 4), {.hooks = fixture.user_hooks()});
    CHECK(joined(*fixture.calls) == expected(3, true));
  }
  SUBCASE("steps = 2") {
    fixture.estimator().evaluate(linear_input_fn(12, 4),
                                 {.steps = 2, .hooks = fixture.user_hooks()});
    CHECK(joined(*fixture.calls) == expected(2, true));
  }
  SUBCASE("a hook asks to stop after the first step") {
    fixture.estimator(1).evaluate(linear_input_fn(12, 4), {.hooks = fixture.user_hooks()});
    CHECK(joined(*fixture.calls) == expected(1, true));
  }
  SUBCASE("an error from the input: no end") {
    fixture.check_input_error([&](Estimator& estimator, const InputFn& input_fn) {
      estimator.evaluate(input_fn, {.hooks = fixture.user_hooks()});
    });
  }
  SUBCASE("an input without a batch: no hook is called") {
    CHECK_THROWS_AS(
        fixture.estimator().evaluate(linear_input_fn(0, 4), {.hooks = fixture.user_hooks()}),
        OutOfRangeError);
    CHECK(fixture.calls->empty());
  }
}

TEST_CASE("predict: begin, after_create_session, before/after_run per batch, end, in order") {
  Fixture fixture;
  SUBCASE("until the input ends") {
    auto rows = fixture.estimator().predict(linear_input_fn(8, 4), {.hooks = fixture.user_hooks()});
    CHECK(rows.size() == 8);
    CHECK(joined(*fixture.calls) == expected(2, true));
  }
  SUBCASE("the consumer stops at the first row") {
    int consumed = 0;
    fixture.estimator().predict(linear_input_fn(8, 4),
                                [&](Predictions) {
                                  ++consumed;
                                  return false;
                                },
                                {.hooks = fixture.user_hooks()});
    CHECK(consumed == 1);
    CHECK(joined(*fixture.calls) == expected(1, true));
  }
  SUBCASE("a hook asks to stop after the first step") {
    auto rows =
        fixture.estimator(1).predict(linear_input_fn(8, 4), {.hooks = fixture.user_hooks()});
    CHECK(rows.size() == 4);
    CHECK(joined(*fixture.calls) == expected(1, true));
  }
  SUBCASE("an error from the input: no end") {
    fixture.check_input_error([&](Estimator& estimator, const InputFn& input_fn) {
      estimator.predict(input_fn, {.hooks = fixture.user_hooks()});
    });
  }
  SUBCASE("an input without a batch: no hook is called") {
    CHECK(fixture.estimator()
              .predict(linear_input_fn(0, 4), {.hooks = fixture.user_hooks()})
              .empty());
    CHECK(fixture.calls->empty());
  }
}
