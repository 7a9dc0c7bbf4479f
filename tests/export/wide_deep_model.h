// A wide&deep classifier over every kind of categorical lookup, for the export suites
// (feature_column_export_test.cpp: the ONNX file and its lookup steps; rest_lookup_test.cpp:
// est-serve with raw string features): DNNLinearCombinedClassifier with label_vocabulary
// {"no", "yes"}, its linear part over a vocabulary list (color: in the ONNX graph, as a
// LabelEncoder), an identity column with a default (day: in the graph too) and a hash bucket
// (name), its DNN part over a numeric column, indicators of color and day, and embeddings of a
// vocabulary file with an OOV bucket (city, mean, with max_norm) and of the hash bucket
// (sqrtn). The probe rows hold what the lookups treat specially: an unknown color (-1,
// dropped), an unknown city (its OOV bucket), ignored values ("" and -1), a day out of range
// (the default).
#pragma once

#include <filesystem>
#include <fstream>

#include "estimator/canned/dnn_linear_combined.h"
#include "estimator/estimator.h"
#include "feature_column/feature_column.h"
#include "tests/command.h"

namespace est::testing::wide_deep {

namespace fc = est::feature_column;

inline Features features(std::vector<float> age, std::vector<std::string> color,
                         std::vector<std::string> city, std::vector<std::string> name,
                         std::vector<int64_t> day) {
  const int64_t n = static_cast<int64_t>(age.size());
  return {{"age", Tensor::from_vector(age, {n, 1})},
          {"color", data::string_tensor(color, {n, 1})},
          {"city", data::string_tensor(city, {n, 1})},
          {"name", data::string_tensor(name, {n, 1})},
          {"day", Tensor::from_vector(day, {n, 1})}};
}

inline Features training_features() {
  return features({20, 35, 50, 65, 28, 41, 33, 59},
                  {"red", "green", "blue", "red", "blue", "green", "red", "blue"},
                  {"paris", "london", "tokyo", "paris", "tokyo", "london", "paris", "tokyo"},
                  {"ann", "bob", "cid", "dan", "eve", "fay", "gus", "hal"},
                  {0, 1, 2, 3, 4, 5, 6, 0});
}
inline Tensor training_labels() {
  return data::string_tensor({"no", "yes", "yes", "no", "yes", "no", "no", "yes"}, {8, 1});
}

// Rows the lookups treat specially: "pink" (not in the list: -1), "berlin" (the OOV bucket),
// "" and -1 (ignored), day 9 (out of range: the default 0).
inline Features probe_features() {
  return features({22, 47, 30, 61, 39}, {"blue", "pink", "", "red", "green"},
                  {"tokyo", "berlin", "paris", "", "london"}, {"zed", "ann", "", "bob", "quinn"},
                  {3, 9, -1, 6, 1});
}

inline std::map<std::string, TensorSpec> receiver_specs() {
  return {{"age", {{-1, 1}}},
          {"color", {{-1, 1}, DType::kString}},
          {"city", {{-1, 1}, DType::kString}},
          {"name", {{-1, 1}, DType::kString}},
          {"day", {{-1, 1}, DType::kI64}}};
}

// The classifier, its city vocabulary written to `vocabulary_file` ("cities.txt").
inline DNNLinearCombinedClassifier classifier(const std::string& model_dir,
                                              const std::string& vocabulary_file) {
  std::ofstream(vocabulary_file) << "paris\nlondon\ntokyo\n";
  auto color = fc::categorical_column_with_vocabulary_list(
      "color", std::vector<std::string>{"red", "green", "blue"});
  auto city =
      fc::categorical_column_with_vocabulary_file("city", vocabulary_file, {.num_oov_buckets = 1});
  auto name = fc::categorical_column_with_hash_bucket("name", 5);
  auto day = fc::categorical_column_with_identity("day", 7, 0);
  return DNNLinearCombinedClassifier(
      {.linear_feature_columns = {color, day, name},
       .dnn_feature_columns = {fc::numeric_column("age"), fc::indicator_column(color),
                               fc::embedding_column(city, 3, {.max_norm = 0.5}),
                               fc::embedding_column(name, 2, {.combiner = fc::Combiner::kSqrtn}),
                               fc::indicator_column(day)},
       .dnn_hidden_units = {4},
       .label_vocabulary = {"no", "yes"},
       .config = {.model_dir = model_dir,
                  .tf_random_seed = 3,
                  .save_summary_steps = 0,
                  .save_checkpoints_secs = std::nullopt,
                  .log_step_count_steps = 1000}});
}

inline InputFn training_input() {
  return [](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(training_features(), training_labels()).batch(4);
  };
}
inline InputFn probe_input() {
  return [](ModeKeys, const InputContext*) {
    return data::Dataset::from_tensor_slices(probe_features()).batch(5);
  };
}

}  // namespace est::testing::wide_deep
