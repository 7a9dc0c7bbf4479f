// WarmStartSettings as TF has it (warm_starting_util.py): vocabulary remapping checked against
// the examples of TF's warm_starting_util_test.py (testWarmStartVarWithVocab,
// testWarmStartVarWithColumnVocab, testWarmStartVarWithVocabConstrainedOldVocabSize), OOV
// buckets and the backup initializer, the list form over every variable (slots included, and
// staged when the model lacks them), the none form, unused map keys, and the log lines.
#include <doctest/doctest.h>

#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/log.h"
#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

std::string write_vocab(const TempDir& dir, const std::string& name,
                        const std::vector<std::string>& entries) {
  std::string path = dir / name;
  std::ofstream out(path);
  for (const std::string& entry : entries) out << entry << "\n";
  return path;
}

Tensor matrix(const std::vector<float>& values, int64_t rows, int64_t columns) {
  return Tensor::from_vector(values, {rows, columns});
}

// A checkpoint holding `bundle` in a directory of its own.
void save_old(const TempDir& dir, TensorBundle bundle) {
  CheckpointManager({.directory = dir.str(), .async = false}).save(bundle);
}

// Captures the checkpoint code's info lines while alive.
struct LogLines {
  std::vector<std::string> lines;
  LogSink previous;
  LogLines() {
    previous =
        set_log_sink([this](LogSeverity, const std::string& line) { lines.push_back(line); });
  }
  ~LogLines() { set_log_sink(previous); }
  int count(const std::string& text) const {
    int n = 0;
    for (const std::string& line : lines) n += line.find(text) != std::string::npos;
    return n;
  }
};

}  // namespace

TEST_CASE("warm start with a vocabulary: TF's documented remappings") {
  TempDir old_dir, model_dir, vocab_dir;
  std::string old_vocab =
      write_vocab(vocab_dir, "old_vocab", {"apple", "banana", "guava", "orange"});
  std::string new_vocab =
      write_vocab(vocab_dir, "new_vocab", {"orange", "guava", "banana", "apple", "raspberry"});
  TensorBundle old;
  old.add_variable("fruit_weights", matrix({0.5, 1, 1.5, 2}, 4, 1));
  save_old(old_dir, old);

  auto run = [&](VocabInfo info, Shape shape = {5, 1}) {
    TensorBundle model;
    model.add_variable("fruit_weights", Tensor::zeros(shape));
    auto result = warm_start(model_dir.str(),
                             {.ckpt_to_initialize_from = old_dir.str(),
                              .var_name_to_vocab_info = {{"fruit_weights", info}}},
                             model);
    REQUIRE(result.has_value());
    CHECK(result->warm_started == std::vector<std::string>{"fruit_weights"});
    return model.find("fruit_weights")->value.to_vector<float>();
  };
  // testWarmStartVarWithVocab.
  CHECK(run({.new_vocab = new_vocab, .new_vocab_size = 5, .old_vocab = old_vocab}) ==
        std::vector<float>{2, 1.5, 1, 0.5, 0});
  // testWarmStartVarWithVocabConstrainedOldVocabSize: only apple and banana were used.
  CHECK(run({.new_vocab = new_vocab,
             .new_vocab_size = 5,
             .old_vocab = old_vocab,
             .old_vocab_size = 2}) == std::vector<float>{0, 0, 1, 0.5, 0});
  // The first 3 entries of the new vocabulary and 2 OOV buckets, missing ones from the backup.
  CHECK(run({.new_vocab = new_vocab,
             .new_vocab_size = 3,
             .num_oov_buckets = 2,
             .old_vocab = old_vocab,
             .backup_initializer = nn::constant(0.25)}) ==
        std::vector<float>{2, 1.5, 1, 0.25, 0.25});
  // Sizes that do not fit the variable, and unreadable vocabularies, are errors naming it.
  TensorBundle model;
  model.add_variable("fruit_weights", Tensor::zeros({4, 1}));
  CHECK_THROWS_WITH_AS(warm_start(model_dir.str(),
                                  {.ckpt_to_initialize_from = old_dir.str(),
                                   .var_name_to_vocab_info = {{"fruit_weights",
                                                               {.new_vocab = new_vocab,
                                                                .new_vocab_size = 5,
                                                                .old_vocab = old_vocab}}}},
                                  model),
                       doctest::Contains("\"fruit_weights\""), InvalidArgumentError);
  CHECK_THROWS_AS(warm_start(model_dir.str(),
                             {.ckpt_to_initialize_from = old_dir.str(),
                              .var_name_to_vocab_info = {{"fruit_weights",
                                                          {.new_vocab = vocab_dir / "missing",
                                                           .new_vocab_size = 4,
                                                           .old_vocab = old_vocab}}}},
                             model),
                  NotFoundError);
}

TEST_CASE("warm start with a class vocabulary on axis 1 (testWarmStartVarWithColumnVocab)") {
  TempDir old_dir, model_dir, vocab_dir;
  std::string old_vocab = write_vocab(vocab_dir, "old_vocab", {"apple", "orange"});
  std::string new_vocab = write_vocab(vocab_dir, "new_vocab", {"orange", "apple", "banana"});
  TensorBundle old;
  old.add_variable("output_layer", matrix({0.5, 0.3, 1, 0.8, 1.5, 1.2, 2, 2.3}, 4, 2));
  save_old(old_dir, old);
  TensorBundle model;
  model.add_variable("output_layer", Tensor::zeros({4, 3}));
  warm_start(
      model_dir.str(),
      {.ckpt_to_initialize_from = old_dir.str(),
       .var_name_to_vocab_info =
           {{"output_layer",
             {.new_vocab = new_vocab, .new_vocab_size = 3, .old_vocab = old_vocab, .axis = 1}}}},
      model);
  CHECK(model.find("output_layer")->value.to_vector<float>() ==
        std::vector<float>{0.3, 0.5, 0, 0.8, 1, 0, 1.2, 1.5, 0, 2.3, 2, 0});
}

TEST_CASE("vars_to_warm_start: the list form reaches slots, none only vocabulary variables") {
  TempDir old_dir, model_dir, vocab_dir;
  TensorBundle old;
  old.add_variable("dense/kernel", Tensor::full({2, 1}, 1.0));
  old.add_slot("dense/kernel/Adagrad", Tensor::full({2, 1}, 5.0));
  old.add_variable("dense/bias", Tensor::full({1}, 2.0));
  old.add_slot("dense/bias/Adagrad", Tensor::full({1}, 6.0));
  old.add_variable("emb/weights", matrix({1, 2}, 2, 1));
  old.add_variable("global_step", Tensor::scalar(40, DType::kI64), false);
  save_old(old_dir, old);
  auto new_model = [] {
    TensorBundle model;
    model.add_variable("dense/kernel", Tensor::zeros({2, 1}));
    model.add_slot("dense/kernel/Adagrad", Tensor::zeros({2, 1}));
    model.add_variable("dense/bias", Tensor::zeros({1}));  // its slot not created yet
    model.add_variable("emb/weights", Tensor::zeros({2, 1}));
    model.add_variable("global_step", Tensor::scalar(0, DType::kI64), false);
    return model;
  };

  // A single regex: trainable variables only, no slot.
  TensorBundle model = new_model();
  auto result =
      warm_start(model_dir.str(),
                 {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = "dense/"}, model);
  CHECK(result->warm_started == std::vector<std::string>{"dense/kernel", "dense/bias"});
  CHECK(model.find("dense/kernel/Adagrad")->value.at({0, 0}) == 0);
  CHECK(result->staged.empty());

  // A list: every variable its patterns match, slots included; the slot the model lacks is
  // handed back to be staged.
  model = new_model();
  LogLines log;
  result = warm_start(model_dir.str(),
                      {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = {"dense/"}},
                      model);
  CHECK(result->warm_started ==
        std::vector<std::string>{"dense/kernel", "dense/kernel/Adagrad", "dense/bias"});
  CHECK(model.find("dense/kernel/Adagrad")->value.at({1, 0}) == 5);
  REQUIRE(result->staged.size() == 1);
  CHECK(result->staged[0].first == "dense/bias/Adagrad");
  CHECK(result->staged[0].second.item() == 6);
  CHECK(model.find("emb/weights")->value.at({0, 0}) == 0);
  // TF's lines: where from, one line per group, the count.
  CHECK(log.count("Warm-starting from: " + old_dir.str()) == 1);
  CHECK(log.count("Warm-started 3 variable(s) by name: dense/kernel, dense/kernel/Adagrad, "
                  "dense/bias") == 1);
  CHECK(log.count("Staged 1 checkpoint value(s)") == 1);
  CHECK(log.count("Warm-started 3 variables.") == 1);
  CHECK(log.count("only in TRAINABLE_VARIABLES") == 0);

  // ".*" in a list takes global_step too, as TF's GLOBAL_VARIABLES collection does.
  model = new_model();
  warm_start(model_dir.str(),
             {.ckpt_to_initialize_from = old_dir.str(), .vars_to_warm_start = {".*"}}, model);
  CHECK(model.find("global_step")->value.item() == 40);

  // None: only the variables with a vocabulary.
  std::string vocab = write_vocab(vocab_dir, "vocab", {"a", "b"});
  std::string reversed = write_vocab(vocab_dir, "reversed", {"b", "a"});
  model = new_model();
  result = warm_start(
      model_dir.str(),
      {.ckpt_to_initialize_from = old_dir.str(),
       .vars_to_warm_start = std::nullopt,
       .var_name_to_vocab_info =
           {{"emb/weights", {.new_vocab = reversed, .new_vocab_size = 2, .old_vocab = vocab}}}},
      model);
  CHECK(result->warm_started == std::vector<std::string>{"emb/weights"});
  CHECK(model.find("emb/weights")->value.to_vector<float>() == std::vector<float>{2, 1});
  CHECK(model.find("dense/kernel")->value.at({0, 0}) == 0);

  // A vocabulary or rename for a variable that is not selected is an error, as TF's ValueError.
  model = new_model();
  CHECK_THROWS_WITH_AS(
      warm_start(
          model_dir.str(),
          {.ckpt_to_initialize_from = old_dir.str(),
           .vars_to_warm_start = "dense/",
           .var_name_to_vocab_info =
               {{"emb/weights", {.new_vocab = reversed, .new_vocab_size = 2, .old_vocab = vocab}}}},
          model),
      doctest::Contains("var_name_to_vocab_info names emb/weights"), InvalidArgumentError);
  CHECK(model.find("dense/kernel")->value.at({0, 0}) == 0);  // nothing assigned
}
