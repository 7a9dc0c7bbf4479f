// A census-like linear model's input rate against its step rate (issue 19): TFRecord
// Examples with 6 numeric and 8 categorical features (5 vocabulary lists, 2 hash buckets,
// 1 identity) and one crossed column (education x occupation), as the TF wide-and-deep census
// tutorial's linear part has them.
//
// Input: read + parse (example_parser) + batch + the categorical columns' lookups
// (pipeline_transform's map), with num_parallel_calls 1 and 2, in examples/s; also parse and
// batch alone, and batch the records first, then parse_example each batch. Step: linear_model +
// sigmoid cross-entropy + FTRL on batches already in memory, (a) reading the ids the pipeline
// computed and (b) doing the lookups inside the step, as TF does. The input keeps up when its rate
// is above the step's: "input_over_step" says by how much. Each figure is the median of 3 runs; the
// load average is printed alongside (the machine may be shared).
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "data/data.h"
#include "feature_column/feature_column.h"
#include "nn/nn.h"
#include "ops/backend.h"

using namespace est;
using namespace est::feature_column;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class Measure>
double median_of_3(Measure&& measure) {
  std::vector<double> runs{measure(), measure(), measure()};
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

const std::vector<std::string> kWorkclass{"Private",     "Self-emp-not-inc", "Self-emp-inc",
                                          "Federal-gov", "Local-gov",        "State-gov",
                                          "Without-pay", "Never-worked"};
const std::vector<std::string> kEducation{"Bachelors", "HS-grad",      "11th",        "Masters",
                                          "9th",       "Some-college", "Assoc-acdm",  "Assoc-voc",
                                          "7th-8th",   "Doctorate",    "Prof-school", "5th-6th",
                                          "10th",      "1st-4th",      "Preschool",   "12th"};
const std::vector<std::string> kMarital{
    "Married-civ-spouse", "Divorced", "Married-spouse-absent", "Never-married", "Separated",
    "Married-AF-spouse",  "Widowed"};
const std::vector<std::string> kRelationship{"Husband",   "Not-in-family", "Wife",
                                             "Own-child", "Unmarried",     "Other-relative"};
const std::vector<std::string> kRace{"White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo",
                                     "Other"};

// Census-like rows written as Examples (values drawn from the vocabularies, plus an unknown
// value now and then, so that OOV buckets are exercised).
void write_census(const std::string& path, int64_t rows) {
  std::mt19937_64 rng(19);
  auto pick = [&](const std::vector<std::string>& vocabulary) {
    return rng() % 50 == 0 ? std::string("unknown") : vocabulary[rng() % vocabulary.size()];
  };
  data::TFRecordWriter writer(path);
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<float> age{static_cast<float>(17 + rng() % 70)},
        education_num{static_cast<float>(1 + rng() % 16)},
        capital_gain{static_cast<float>(rng() % 10 == 0 ? rng() % 20000 : 0)},
        capital_loss{static_cast<float>(rng() % 20 == 0 ? rng() % 3000 : 0)},
        hours{static_cast<float>(10 + rng() % 60)},
        fnlwgt{static_cast<float>(20000 + rng() % 400000)};
    std::vector<int64_t> gender{static_cast<int64_t>(rng() % 2)},
        label{static_cast<int64_t>(rng() % 4 == 0)};
    writer.write(data::ExampleBuilder()
                     .add_floats("age", age)
                     .add_floats("education_num", education_num)
                     .add_floats("capital_gain", capital_gain)
                     .add_floats("capital_loss", capital_loss)
                     .add_floats("hours_per_week", hours)
                     .add_floats("fnlwgt", fnlwgt)
                     .add_bytes("workclass", {pick(kWorkclass)})
                     .add_bytes("education", {pick(kEducation)})
                     .add_bytes("marital_status", {pick(kMarital)})
                     .add_bytes("relationship", {pick(kRelationship)})
                     .add_bytes("race", {pick(kRace)})
                     .add_bytes("occupation", {fmt::format("occupation-{}", rng() % 40)})
                     .add_bytes("native_country", {fmt::format("country-{}", rng() % 60)})
                     .add_int64s("gender", gender)
                     .add_int64s("label", label)
                     .serialize());
  }
}

struct Model {
  std::vector<ColumnPtr> numeric;
  std::vector<CategoricalColumnPtr> categorical;  // the 8 and the cross
};

Model census_columns() {
  Model m;
  for (const char* key :
       {"age", "education_num", "capital_gain", "capital_loss", "hours_per_week", "fnlwgt"})
    m.numeric.push_back(numeric_column(key));
  VocabularyOptions oov{.num_oov_buckets = 1};
  auto education = categorical_column_with_vocabulary_list("education", kEducation, oov);
  auto occupation = categorical_column_with_hash_bucket("occupation", 1000);
  m.categorical = {categorical_column_with_vocabulary_list("workclass", kWorkclass, oov),
                   education,
                   categorical_column_with_vocabulary_list("marital_status", kMarital, oov),
                   categorical_column_with_vocabulary_list("relationship", kRelationship, oov),
                   categorical_column_with_vocabulary_list("race", kRace, oov),
                   occupation,
                   categorical_column_with_hash_bucket("native_country", 1000),
                   categorical_column_with_identity("gender", 2),
                   crossed_column({"education", "occupation"}, 10000)};
  return m;
}

std::vector<ColumnPtr> all_columns(const Model& m, const std::vector<CategoricalColumnPtr>& cat) {
  std::vector<ColumnPtr> out = m.numeric;
  out.insert(out.end(), cat.begin(), cat.end());
  return out;
}

// Drains the dataset; examples per second.
double input_rate(const data::Dataset& ds) {
  auto start = std::chrono::steady_clock::now();
  int64_t examples = 0;
  data::Iterator it = ds.iterator();
  while (auto batch = it.next()) examples += batch->labels.dim(0);
  return static_cast<double>(examples) / seconds_since(start);
}

// Training steps over `batches` (cycled) until `steps`; examples per second.
double step_rate(const std::vector<data::Element>& batches, const std::vector<ColumnPtr>& columns,
                 nn::VariableStore& store, int64_t steps) {
  const auto optimizer = nn::optim::ftrl(0.05);
  auto run = [&](size_t i) {
    const data::Element& batch = batches[i % batches.size()];
    nn::ModelContext context(store);
    Tensor logits = linear_model(batch.features, columns, context);
    Tensor labels = ops::cast(batch.labels, DType::kF32).reshape({batch.labels.dim(0), 1});
    optimizer.minimize(nn::sigmoid_cross_entropy(labels, logits), context).run();
  };
  run(0);  // variables and slots created
  auto start = std::chrono::steady_clock::now();
  int64_t examples = 0;
  for (int64_t s = 0; s < steps; ++s) {
    run(static_cast<size_t>(s));
    examples += batches[static_cast<size_t>(s) % batches.size()].labels.dim(0);
  }
  return static_cast<double>(examples) / seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"census-like linear model: input pipeline rate against step rate"};
  int64_t rows = 20000, batch = 256, steps = 100;
  int threads = 1;
  app.add_option("--rows", rows, "Examples written and read per pass");
  app.add_option("--batch", batch, "Batch size");
  app.add_option("--steps", steps, "Training steps timed per run");
  app.add_option("--threads", threads, "Kernel threads for the step");
  CLI11_PARSE(app, argc, argv);
  ops::set_num_threads(threads);

  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("est_fc_bench_{}", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "census.tfrecord").string();
  write_census(path, rows);

  const Model m = census_columns();
  const PipelineTransform transform = pipeline_transform(m.categorical);
  data::FeatureSpecs spec = make_parse_example_spec(all_columns(m, m.categorical));
  spec.emplace("label", data::FixedLenFeature{{}, DType::kI64});
  auto parsed = [&](int parallel) {
    return data::tfrecord_dataset({path})
        .map(data::example_parser(spec, "label"), parallel)
        .batch(batch);
  };
  // TF's other idiom: batch the serialised records, then parse_example the batch (its direct
  // path writes each record straight into the batch's tensors).
  auto batch_parsed = [&](int parallel) {
    data::MapFn as_string = [](data::Element e) {
      data::Element out;
      out.value = data::string_tensor({data::tensor_bytes(e.value)}).reshape({});
      return out;
    };
    data::MapFn parse = [&spec](data::Element e) {
      const std::vector<std::string> records = e.value.to_vector<std::string>();
      data::Element out;
      out.features = data::parse_example(records, spec);
      out.labels = out.features.at("label");
      out.features.erase("label");
      return out;
    };
    return data::tfrecord_dataset({path})
        .map(as_string, parallel)
        .batch(batch)
        .map(parse, parallel);
  };
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  fmt::print("est feature_column_bench rows={} batch={} step_threads={} load_average={:.2f}\n",
             rows, batch, threads, load[0]);
  for (int parallel : {1, 2}) {
    const double parse_only = median_of_3([&] { return input_rate(parsed(parallel)); });
    const double with_lookups =
        median_of_3([&] { return input_rate(parsed(parallel).map(transform.map_fn, parallel)); });
    const double batched = median_of_3(
        [&] { return input_rate(batch_parsed(parallel).map(transform.map_fn, parallel)); });
    fmt::print(
        "est input num_parallel_calls={} parse_examples_per_s={:.0f} "
        "parse_and_lookups_examples_per_s={:.0f} "
        "batch_then_parse_and_lookups_examples_per_s={:.0f}\n",
        parallel, parse_only, with_lookups, batched);
  }

  // Steps on batches in memory: (a) ids from the pipeline, (b) lookups in the step.
  std::vector<data::Element> raw, ready;
  {
    data::Iterator it = parsed(1).take(8).iterator();
    while (auto b = it.next()) {
      raw.push_back(*b);
      ready.push_back(transform.map_fn(*b));
    }
  }
  nn::VariableStore store_a, store_b;
  const double step_ids = median_of_3(
      [&] { return step_rate(ready, all_columns(m, transform.columns), store_a, steps); });
  const double step_lookups =
      median_of_3([&] { return step_rate(raw, all_columns(m, m.categorical), store_b, steps); });
  const double input =
      median_of_3([&] { return input_rate(batch_parsed(2).map(transform.map_fn, 2).prefetch(2)); });
  fmt::print(
      "est step ids_from_pipeline_examples_per_s={:.0f} lookups_in_step_examples_per_s={:.0f} "
      "step_speedup={:.2f}\n",
      step_ids, step_lookups, step_ids / step_lookups);
  fmt::print(
      "est input_vs_step input_examples_per_s={:.0f} (batch then parse, num_parallel_calls=2, "
      "prefetch) "
      "step_examples_per_s={:.0f} input_over_step={:.2f}\n",
      input, step_ids, input / step_ids);
  std::filesystem::remove_all(dir);
}
