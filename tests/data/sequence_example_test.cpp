// tf.train.SequenceExample parsing against the documentation of
// tf.io.parse_single_sequence_example and tf.io.parse_sequence_example
// (tensorflow/python/ops/parsing_ops.py): context features as in an Example;
// FixedLenSequenceFeature(shape) gives (T,) + shape, batched (B, T) + shape padded with 0 / ""
// plus the lengths; sequence VarLenFeatures give SparseTensors indexed [time, index] (batched
// [batch, time, index]); a missing FeatureList fails unless allow_missing.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "data/sequence_example.h"
#include "data/tfrecord.h"
#include "ops/sparse.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

// Sequence i: context "id" = i, "lang" = "en"; i steps of "tokens" (step t holds t + 1 strings)
// and of "frames" ([2] floats each); "tags" missing everywhere.
std::string sequence(int64_t i) {
  std::vector<int64_t> id{i};
  std::vector<std::vector<std::string>> tokens;
  std::vector<std::vector<float>> frames;
  for (int64_t t = 0; t < i; ++t) {
    tokens.push_back(std::vector<std::string>(static_cast<size_t>(t + 1), fmt::format("w{}", t)));
    frames.push_back({static_cast<float>(10 * i + t), -1.0f});
  }
  return SequenceExampleBuilder()
      .context_int64s("id", id)
      .context_bytes("lang", {"en"})
      .feature_list_bytes("tokens", tokens)
      .feature_list_floats("frames", frames)
      .serialize();
}

const FeatureSpecs kContext{{"id", FixedLenFeature{{}, DType::kI64}},
                            {"lang", VarLenFeature{DType::kString}}};
const FeatureSpecs kSequence{
    {"tokens", VarLenFeature{DType::kString}},
    {"frames", FixedLenSequenceFeature{.shape = {2}, .dtype = DType::kF32}},
    {"tags", FixedLenSequenceFeature{.shape = {}, .dtype = DType::kI64, .allow_missing = true}},
    {"notes", VarLenFeature{DType::kString}}};

}  // namespace

TEST_CASE("parse_single_sequence_example: context and sequence features") {
  ParsedSequenceExample parsed = parse_single_sequence_example(sequence(3), kContext, kSequence);
  CHECK(parsed.context.at("id").to_vector<int64_t>() == std::vector<int64_t>{3});
  CHECK(parsed.context.at("lang").values().to_vector<std::string>() ==
        std::vector<std::string>{"en"});
  const Tensor& frames = parsed.sequence.at("frames");
  CHECK(frames.shape() == Shape{3, 2});  // (T,) + shape
  CHECK(frames.to_vector<float>() == std::vector<float>{30, -1, 31, -1, 32, -1});
  const Tensor& tokens = parsed.sequence.at("tokens");
  REQUIRE(tokens.is_sparse());
  CHECK(tokens.shape() == Shape{3, 3});  // [T, most values in a step]
  CHECK(tokens.indices().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 1, 0, 1, 1, 2, 0, 2, 1, 2, 2});
  CHECK(tokens.values().to_vector<std::string>() ==
        std::vector<std::string>{"w0", "w1", "w1", "w2", "w2", "w2"});
  CHECK(parsed.sequence.at("tags").shape() == Shape{0});  // missing, allowed
  CHECK(parsed.sequence.at("notes").shape() == Shape{0, 0});
  CHECK(parsed.sequence.at("notes").indices().shape() == Shape{0, 2});
}

TEST_CASE("parse_sequence_example: padded batches and lengths") {
  std::vector<std::string> records{sequence(2), sequence(0), sequence(3)};
  ParsedSequenceExamples parsed = parse_sequence_example(records, kContext, kSequence);
  CHECK(parsed.context.at("id").to_vector<int64_t>() == std::vector<int64_t>{2, 0, 3});
  CHECK(parsed.context.at("lang").shape() == Shape{3, 1});
  const Tensor& frames = parsed.sequence.at("frames");
  CHECK(frames.shape() == Shape{3, 3, 2});  // (B, T) + shape, padded with 0
  CHECK(frames.to_vector<float>() ==
        std::vector<float>{20, -1, 21, -1, 0, 0, 0, 0, 0, 0, 0, 0, 30, -1, 31, -1, 32, -1});
  CHECK(parsed.lengths.at("frames").to_vector<int64_t>() == std::vector<int64_t>{2, 0, 3});
  CHECK(parsed.lengths.at("tags").to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  CHECK(parsed.lengths.count("tokens") == 0);  // lengths are for the dense ones only
  const Tensor& tokens = parsed.sequence.at("tokens");
  CHECK(tokens.shape() == Shape{3, 3, 3});
  CHECK(tokens.indices().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 0, 1, 0, 0, 1, 1,  // example 0: steps 0 and 1
                             2, 0, 0, 2, 1, 0, 2, 1, 1, 2, 2, 0, 2, 2, 1, 2, 2, 2});
  CHECK(ops::sparse::to_dense(tokens).to_vector<std::string>()[3 * 3 * 2 + 3 * 2 + 2] == "w2");
}

TEST_CASE("SequenceExample parsing errors name the list, the step and the fix") {
  const std::string record = sequence(2);
  auto error = [&](const FeatureSpecs& context, const FeatureSpecs& seq) {
    return error_message<InvalidArgumentError>(
        [&] { parse_single_sequence_example(record, context, seq); });
  };
  CHECK(contains(error({}, {{"tags", FixedLenSequenceFeature{{}, DType::kI64}}}),
                 "feature list 'tags' is required but could not be found; set allow_missing"));
  CHECK(contains(error({}, {{"frames", FixedLenSequenceFeature{{3}, DType::kF32}}}),
                 "feature list 'frames' step 0 has 2 values"));
  CHECK(contains(error({}, {{"frames", FixedLenSequenceFeature{{2}, DType::kI64}}}),
                 "feature list 'frames' step 0 is a float_list"));
  CHECK(contains(error({}, {{"frames",
                             FixedLenSequenceFeature{
                                 .shape = {2}, .allow_missing = true, .default_value = 1.0}}}),
                 "takes no default"));
  CHECK(contains(
      error({{"frames", FixedLenSequenceFeature{.shape = {2}, .allow_missing = true}}}, {}),
      "context features take FixedLenFeature or VarLenFeature"));
  CHECK(contains(error({}, {{"id", FixedLenFeature{{}, DType::kI64}}}),
                 "sequence features take FixedLenSequenceFeature or VarLenFeature"));
  CHECK(contains(error({}, {}), "no context or sequence features"));
  CHECK(contains(error_message<DataLossError>(
                     [&] { parse_single_sequence_example("\xff\xff", kContext, kSequence); }),
                 "not a valid serialised tf.train.SequenceExample"));
  // The batch's error names the example.
  std::vector<std::string> records{record, SequenceExampleBuilder().serialize()};
  CHECK(contains(
      error_message<InvalidArgumentError>([&] { parse_sequence_example(records, kContext, {}); }),
      "serialized sequence example 1"));
}

TEST_CASE("sequence_example_parser in a dataset, with padded_batch") {
  std::string path = scratch_file("sequences.tfrecord");
  {
    TFRecordWriter writer(path);
    for (int64_t i = 1; i <= 4; ++i) writer.write(sequence(i));
  }
  FeatureSpecs seq{{"frames", FixedLenSequenceFeature{.shape = {2}, .dtype = DType::kF32}}};
  Dataset ds = tfrecord_dataset({path}).map(
      sequence_example_parser({{"id", FixedLenFeature{{}, DType::kI64}}}, seq, /*label_key=*/"id"));
  auto batches = drain(ds.padded_batch(2));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].labels.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(batches[0].features.at("frames").shape() == Shape{2, 2, 2});
  CHECK(batches[1].features.at("frames").to_vector<float>() ==
        std::vector<float>{30, -1, 31, -1, 32, -1, 0, 0, 40, -1, 41, -1, 42, -1, 43, -1});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   sequence_example_parser({{"frames", FixedLenFeature{{}, DType::kI64}}}, seq);
                 }),
                 "both a context and a sequence feature"));
}
