// tf.train.SequenceExample: parsing with context and sequence feature specs, as
// tf.io.parse_single_sequence_example and tf.io.parse_sequence_example do
// (tensorflow/python/ops/parsing_ops.py, and the kernels in example_parsing_ops.cc /
// example_proto_fast_parsing.cc), and building SequenceExamples for writers and tests.
//
// Context features (FixedLenFeature, VarLenFeature) parse as in an Example. Sequence features
// read the FeatureList of the same name, one Feature per step:
//   - FixedLenSequenceFeature(shape): every step holds exactly shape's count of values; one
//     sequence gives [T, ...shape]; a batch [batch, longest T, ...shape] padded with 0 (""
//     for strings), with its lengths (int64 [batch]) under the same name in `lengths`. A missing
//     list is an error unless allow_missing (then T = 0). TF takes no default here.
//   - VarLenFeature (sparse mode): indices (step, position), dense shape [T, most values in a
//     step]; a batch puts the example's index in front, [batch, longest T, most values]. A
//     missing list gives no entries (shape [0, 0]); a step with no list set holds no values.
// As in TF, the same name may be used in both specs (they are separate outputs).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/example.h"

namespace est::data {

struct ParsedSequenceExample {
  Features context;
  Features sequence;
};
ParsedSequenceExample parse_single_sequence_example(
    std::string_view serialized, const FeatureSpecs& context_features,
    const FeatureSpecs& sequence_features, std::string_view where = "serialized sequence example");

struct ParsedSequenceExamples {
  Features context;
  Features sequence;
  Features lengths;  // per FixedLenSequenceFeature: int64 [batch], each example's step count
};
// Errors name the example's index in the batch (sequence_example_batch.cpp).
ParsedSequenceExamples parse_sequence_example(std::span<const std::string> serialized,
                                              const FeatureSpecs& context_features,
                                              const FeatureSpecs& sequence_features);

// For ds.map over TFRecord records (uint8 values, or one string): an element whose features
// hold the context and the sequence features together (a name in both specs is then an
// error), with `label_key` (when not empty) moved from them to the labels. Batch the result
// with padded_batch where FixedLenSequenceFeature lengths differ, or use
// parse_sequence_example on batches of records.
MapFn sequence_example_parser(FeatureSpecs context_features, FeatureSpecs sequence_features,
                              std::string label_key = "");

// Builds a SequenceExample: context features as ExampleBuilder adds them, feature lists one
// Feature per step.
class SequenceExampleBuilder {
 public:
  SequenceExampleBuilder();
  ~SequenceExampleBuilder();
  SequenceExampleBuilder(SequenceExampleBuilder&&) noexcept;
  SequenceExampleBuilder& operator=(SequenceExampleBuilder&&) noexcept;

  SequenceExampleBuilder& context_floats(const std::string& name, std::span<const float> values);
  SequenceExampleBuilder& context_int64s(const std::string& name, std::span<const int64_t> values);
  SequenceExampleBuilder& context_bytes(const std::string& name,
                                        const std::vector<std::string>& values);
  SequenceExampleBuilder& feature_list_floats(const std::string& name,
                                              const std::vector<std::vector<float>>& steps);
  SequenceExampleBuilder& feature_list_int64s(const std::string& name,
                                              const std::vector<std::vector<int64_t>>& steps);
  SequenceExampleBuilder& feature_list_bytes(const std::string& name,
                                             const std::vector<std::vector<std::string>>& steps);
  std::string serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace est::data
