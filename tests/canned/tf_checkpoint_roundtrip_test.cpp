// The proof that est's TensorFlow checkpoints are TensorFlow's: a DNNClassifier (Adagrad)
// and a LinearClassifier (Ftrl) trained 3 steps with RunConfig::tf_checkpoint_format; their
// model_dir read by the independent Python reader (tests/scripts/tf_bundle_read.py, not est's
// reader) as tf.train.latest_checkpoint + load_checkpoint would, with TF1's names (the layers,
// their optimizer slots, global_step as int64) and every value equal to est's own checkpoint;
// then the TF checkpoint converted back into a fresh model_dir (what `est-ckpt convert --to est`
// runs) continues training, and the loss of the next step is exactly the loss of the job that
// never left est's format (the same batch every step, so the input position, which TF's format
// does not hold, plays no part), as are all variables after it.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/tf_convert.h"
#include "tests/canned/canned_test_util.h"
#include "tests/estimator/loss_recorder.h"
#include "tests/skip.h"

using namespace canned_test;
using est_test::LossRecorder;
using est_test::TempDir;

namespace {

// One fixed batch, every step.
InputFn same_batch(Task task) {
  return [task](ModeKeys, const InputContext*) { return synthetic(task, 32).batch(32).repeat(); };
}

std::optional<std::string> run_reader(const std::string& model_dir, std::string* output) {
  FILE* pipe = ::popen(fmt::format("/usr/bin/python3 {}/tests/scripts/tf_bundle_read.py {} --json",
                                   EST_SOURCE_ROOT, model_dir)
                           .c_str(),
                       "r");
  if (!pipe) return "popen failed";
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output->append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0) return "the reader failed (status " + std::to_string(status) + ")";
  return std::nullopt;
}

struct Model {
  const char* name;
  Task task;
  std::function<std::unique_ptr<Estimator>(RunConfig)> make;
  std::vector<std::string> tf1_names;  // names TF1's canned estimator writes
};

std::vector<Model> models() {
  return {{"DNNClassifier",
           Task::kThreeClasses,
           [](RunConfig c) {
             return std::make_unique<DNNClassifier>(
                 DNNClassifierOptions{.hidden_units = {8, 4},
                                      .feature_columns = dnn_columns(),
                                      .n_classes = 3,
                                      .config = c});
           },
           {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_0/kernel/Adagrad",
            "dnn/hiddenlayer_1/bias/Adagrad", "dnn/logits/kernel", "global_step"}},
          {"LinearClassifier",
           Task::kBinary,
           [](RunConfig c) {
             return std::make_unique<LinearClassifier>(
                 LinearClassifierOptions{.feature_columns = linear_columns(), .config = c});
           },
           {"linear/linear_model/x1/weights", "linear/linear_model/x1/weights/Ftrl",
            "linear/linear_model/x1/weights/Ftrl_1", "linear/linear_model/bias_weights",
            "global_step"}}};
}

}  // namespace

TEST_CASE("canned estimators' TF checkpoints: read independently, resumed with the same loss") {
  const auto probe = std::system(
      "/usr/bin/python3 -c 'import numpy, google.protobuf' 2>/dev/null "
      "&& protoc --version >/dev/null 2>&1");
  if (probe != 0)
    return est::testing::skip(
        "the independent reader needs /usr/bin/python3 with numpy and protobuf, and protoc "
        "(Debian: python3-numpy python3-protobuf protobuf-compiler)");
  for (const Model& m : models()) {
    const std::string model_name = m.name;
    CAPTURE(model_name);
    TempDir job, converted;
    RunConfig with_tf = config(job.str());
    with_tf.tf_checkpoint_format = true;
    auto first_losses = std::make_shared<std::vector<double>>();
    m.make(with_tf)->train(same_batch(m.task),
                           {.hooks = {std::make_shared<LossRecorder>(first_losses)}, .steps = 3});

    // The model_dir as TensorFlow reads it, by a reader that is not est's.
    std::string json;
    const auto failure = run_reader(job.str(), &json);
    REQUIRE_MESSAGE(!failure, *failure, json);
    const nlohmann::json tf = nlohmann::json::parse(json);
    for (const std::string& name : m.tf1_names) CHECK_MESSAGE(tf.contains(name), name);
    CHECK(tf["global_step"]["dtype"] == "int64");
    CHECK(tf["global_step"]["values"][0] == 3);
    const checkpoint::TensorBundle est_ckpt = checkpoint::load(job.str());
    CHECK(tf.size() == est_ckpt.tensors.size());
    for (const checkpoint::TensorEntry& entry : est_ckpt.tensors) {
      CAPTURE(entry.name);
      REQUIRE(tf.contains(entry.name));
      const std::vector<double> values = entry.value.to_vector<double>();
      CHECK(tf[entry.name]["values"].get<std::vector<double>>() == values);
    }

    // Back into est's format in a fresh model_dir, and one more step there and in the job.
    checkpoint::convert_to_est(job.str(), converted.str());
    auto resumed = std::make_shared<std::vector<double>>();
    auto reference = std::make_shared<std::vector<double>>();
    auto from_tf = m.make(config(converted.str()));
    from_tf->train(same_batch(m.task),
                   {.hooks = {std::make_shared<LossRecorder>(resumed)}, .steps = 1});
    auto never_left = m.make(config(job.str()));
    never_left->train(same_batch(m.task),
                      {.hooks = {std::make_shared<LossRecorder>(reference)}, .steps = 1});
    REQUIRE(resumed->size() == 1);
    REQUIRE(reference->size() == 1);
    CHECK(resumed->front() == reference->front());
    CHECK(resumed->front() != first_losses->front());  // it continued, it did not start over
    for (const std::string& name : never_left->get_variable_names()) {
      CAPTURE(name);
      CHECK(from_tf->get_variable_value(name).to_vector<double>() ==
            never_left->get_variable_value(name).to_vector<double>());
    }
    MESSAGE(
        fmt::format("{}: loss at step 4 {:.9g} resumed from the TF checkpoint, {:.9g} from "
                    "est's own; step 1 was {:.9g}",
                    m.name, resumed->front(), reference->front(), first_losses->front()));
  }
}
