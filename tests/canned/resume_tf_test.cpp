// Continuing a TF1 job from its checkpoint (checkpoint/tf_resume.h): a canned estimator trained
// in est, its checkpoint re-expressed as TensorFlow's `model.ckpt-N` (the test bundle writer,
// TF1's names, no est checkpoint left), resumes in est with the same global step and the same
// losses as from est's own checkpoint: every variable, the optimizer's slots (Ftrl's
// `<var>/Ftrl` and `<var>/Ftrl_1`, Adagrad's `<var>/Adagrad`, Adam's `<var>/Adam`, `Adam_1`,
// `beta1_power`, `beta2_power`) and global_step restored, as TF's Estimator restores them; then
// it writes its own checkpoints. A TF checkpoint lacking a variable or holding it in another
// shape is an error naming the variable, the checkpoint and what to do.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "tests/canned/canned_test_util.h"
#include "tests/checkpoint/tf_bundle_helpers.h"

using namespace canned_test;
using est_test::TempDir;
namespace fs = std::filesystem;

namespace {

// The loss and global step after every step.
class LossHook : public SessionRunHook {
 public:
  SessionRunArgs before_run(SessionRunContext&) override { return {.fetches = {"loss"}}; }
  void after_run(SessionRunContext&, const SessionRunValues& values) override {
    losses.push_back(values.results.at("loss").item());
    steps.push_back(values.global_step);
  }
  std::vector<double> losses;
  std::vector<int64_t> steps;
};

// The same 32 examples at every step: TensorFlow's checkpoint holds no input position, so the
// next batch must not depend on it for the two runs to be compared.
InputFn same_batch(Task task) {
  return [task](ModeKeys, const InputContext*) { return synthetic(task, 32).batch(32).repeat(); };
}

// est's latest checkpoint of `est_dir` as TensorFlow's `model.ckpt-N` in `tf_dir`, named by a
// `checkpoint` state file, leaving out the tensors `drop` names and writing `reshaped` instead
// of theirs.
void write_tf_model_dir(const std::string& est_dir, const std::string& tf_dir,
                        const std::string& drop = "",
                        const std::map<std::string, Tensor>& reshaped = {}) {
  checkpoint::TensorBundle bundle = checkpoint::load(*checkpoint::latest_checkpoint(est_dir));
  checkpoint::tf_test::BundleBuilder tf;
  for (const checkpoint::TensorEntry& entry : bundle.tensors) {
    if (entry.name == drop) continue;
    auto other = reshaped.find(entry.name);
    tf.add_tensor(entry.name, other == reshaped.end() ? entry.value : other->second);
  }
  fs::create_directories(tf_dir);
  const std::string name = fmt::format("model.ckpt-{}", bundle.global_step);
  tf.write(tf_dir + "/" + name);
  checkpoint::write_checkpoint_state(
      tf_dir, {.model_checkpoint_path = name, .all_model_checkpoint_paths = {name}});
}

std::map<std::string, std::vector<float>> float_variables(const Estimator& estimator) {
  std::map<std::string, std::vector<float>> values;
  for (const std::string& name : estimator.get_variable_names()) {
    Tensor value = estimator.get_variable_value(name);
    if (value.dtype() == DType::kF32) values[name] = value.to_vector<float>();
  }
  return values;
}

const Case& case_named(const std::string& name) {
  static const std::vector<Case> all = cases();
  for (const Case& c : all)
    if (c.name == name) return c;
  FAIL("no case " << name);
  return all.front();
}

}  // namespace

TEST_CASE("canned estimators continue from TensorFlow's checkpoint as from their own") {
  // Ftrl (LinearClassifier), Adagrad (DNNClassifier), Adam (DNNRegressor).
  for (const char* name : {"LinearClassifier", "DNNClassifier", "DNNRegressor"}) {
    CAPTURE(name);
    const Case& c = case_named(name);
    TempDir est_dir, tf_parent;
    c.make(config(est_dir.str()))->train(same_batch(c.task), {.steps = 3});
    const std::string tf_dir = tf_parent.str() + "/model";
    write_tf_model_dir(est_dir.str(), tf_dir);
    REQUIRE(est_test::files_with_prefix(tf_dir, "model.ckpt-3.h5").empty());

    auto own = std::make_shared<LossHook>(), tf = std::make_shared<LossHook>();
    std::unique_ptr<Estimator> from_own = c.make(config(est_dir.str()));
    std::unique_ptr<Estimator> from_tf = c.make(config(tf_dir));
    from_own->train(same_batch(c.task), {.hooks = {own}, .steps = 2});
    from_tf->train(same_batch(c.task), {.hooks = {tf}, .steps = 2});
    CHECK(tf->steps == std::vector<int64_t>{4, 5});
    CHECK(own->steps == tf->steps);
    REQUIRE(own->losses.size() == 2);
    CHECK(tf->losses == own->losses);
    CHECK(float_variables(*from_tf) == float_variables(*from_own));
    // est's own checkpoint written after TensorFlow's.
    CHECK(*checkpoint::latest_checkpoint(tf_dir) == tf_dir + "/model.ckpt-5.h5");
    CHECK(fs::exists(tf_dir + "/model.ckpt-3.index"));
  }
}

TEST_CASE("retention deletes TensorFlow's checkpoint files in their turn, as TF's Saver does") {
  const Case& c = case_named("LinearClassifier");
  TempDir est_dir, tf_parent;
  c.make(config(est_dir.str()))->train(same_batch(c.task), {.steps = 2});
  const std::string tf_dir = tf_parent.str() + "/model";
  write_tf_model_dir(est_dir.str(), tf_dir);
  REQUIRE(fs::exists(tf_dir + "/model.ckpt-2.index"));
  RunConfig keep_two = config(tf_dir);
  keep_two.keep_checkpoint_max = 2;
  keep_two.keep_checkpoint_every_n_hours = 0;  // none preserved beside the last two
  keep_two.save_checkpoints_steps = 1;
  keep_two.save_checkpoints_secs = std::nullopt;
  c.make(keep_two)->train(same_batch(c.task),
                          {.steps = 2});  // saves 3 and 4: TF's model.ckpt-2 goes
  CHECK_FALSE(fs::exists(tf_dir + "/model.ckpt-2.index"));
  CHECK_FALSE(fs::exists(tf_dir + "/model.ckpt-2.data-00000-of-00001"));
  CHECK(*checkpoint::latest_checkpoint(tf_dir) == tf_dir + "/model.ckpt-4.h5");
}

TEST_CASE("a TensorFlow checkpoint lacking a variable or with another shape: clear errors") {
  const Case& c = case_named("DNNClassifier");
  TempDir est_dir, tf_parent;
  c.make(config(est_dir.str()))->train(same_batch(c.task), {.steps = 1});
  const std::string missing_dir = tf_parent.str() + "/missing";
  write_tf_model_dir(est_dir.str(), missing_dir, "dnn/logits/bias/Adagrad");
  const std::string prefix = missing_dir + "/model.ckpt-1";
  try {
    c.make(config(missing_dir))->train(same_batch(c.task), {.steps = 1});
    FAIL("training from a checkpoint without dnn/logits/bias/Adagrad succeeded");
  } catch (const NotFoundError& error) {
    const std::string what = error.what();
    CAPTURE(what);
    CHECK(what.find("'dnn/logits/bias/Adagrad'") != std::string::npos);
    CHECK(what.find(prefix) != std::string::npos);
    CHECK(what.find("warm_start_from") != std::string::npos);
  }

  const std::string shape_dir = tf_parent.str() + "/shape";
  write_tf_model_dir(est_dir.str(), shape_dir, "",
                     {{"dnn/logits/bias", Tensor::zeros({5}, DType::kF32)}});
  try {
    c.make(config(shape_dir))->train(same_batch(c.task), {.steps = 1});
    FAIL("training from a checkpoint with a [5] dnn/logits/bias succeeded");
  } catch (const Error& error) {
    const std::string what = error.what();
    CAPTURE(what);
    CHECK(what.find("dnn/logits/bias") != std::string::npos);
    CHECK(what.find(shape_dir + "/model.ckpt-1") != std::string::npos);
    CHECK(what.find("[5]") != std::string::npos);
    CHECK(what.find("[3]") != std::string::npos);
    CHECK(what.find("warm_start_from") != std::string::npos);
  }
}
