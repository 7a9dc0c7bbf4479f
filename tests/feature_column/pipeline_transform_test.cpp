// pipeline_transform: the ids a dataset map computes in the input pipeline (with parallel
// calls) are the columns' own, and linear_model over the transformed columns has the same
// variables (TF's names) and gradients as over the original ones.
#include <doctest/doctest.h>

#include <algorithm>

#include <fmt/format.h>

#include "data/example.h"
#include "feature_column/feature_column.h"
#include "ops/autograd.h"
#include "ops/math.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;

namespace {

std::vector<data::Element> drain(const data::Dataset& ds) {
  std::vector<data::Element> out;
  data::Iterator it = ds.iterator();
  while (auto element = it.next()) out.push_back(std::move(*element));
  return out;
}

}  // namespace

TEST_CASE("pipeline_transform computes the columns' ids in a parallel map") {
  auto education = categorical_column_with_vocabulary_list(
      "education", std::vector<std::string>{"Bachelors", "Masters", "Doctorate"},
      {.num_oov_buckets = 2});
  auto occupation = categorical_column_with_hash_bucket("occupation", 100);
  auto age = categorical_column_with_identity("age_bucket", 10, 0);
  auto cross = crossed_column({"education", "occupation"}, 1000);
  std::vector<CategoricalColumnPtr> categorical{education, occupation, age, cross};
  std::vector<ColumnPtr> all(categorical.begin(), categorical.end());
  all.push_back(numeric_column("hours"));
  data::FeatureSpecs spec = make_parse_example_spec(all);

  const std::vector<std::string> degrees{"Bachelors", "Masters", "Doctorate", "HS-grad"};
  std::vector<std::string> records;
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int64_t> bucket{i % 12};  // 10 and 11 are out of range: default 0
    std::vector<float> hours{static_cast<float>(i)};
    records.push_back(data::ExampleBuilder()
                          .add_bytes("education", {degrees[static_cast<size_t>(i) % 4]})
                          .add_bytes("occupation", {fmt::format("job{}", i % 7)})
                          .add_int64s("age_bucket", bucket)
                          .add_floats("hours", hours)
                          .serialize());
  }
  const data::Dataset parsed =
      data::Dataset::from_strings(records).map(data::example_parser(spec), 2).batch(5);
  PipelineTransform transform = pipeline_transform(categorical);
  std::vector<data::Element> raw = drain(parsed);
  std::vector<data::Element> ready = drain(parsed.map(transform.map_fn, 3));
  REQUIRE(raw.size() == 5);
  REQUIRE(ready.size() == 5);
  for (size_t b = 0; b < raw.size(); ++b)
    for (size_t c = 0; c < categorical.size(); ++c) {
      IdWeightPair expected = categorical[c]->sparse_tensors(raw[b].features);
      IdWeightPair got = transform.columns[c]->sparse_tensors(ready[b].features);
      CHECK(transform.columns[c]->name() == categorical[c]->name());
      CHECK(got.ids.shape() == expected.ids.shape());
      CHECK(got.ids.indices().to_vector<int64_t>() == expected.ids.indices().to_vector<int64_t>());
      CHECK(got.ids.values().to_vector<int64_t>() == expected.ids.values().to_vector<int64_t>());
    }

  // linear_model: the same variables and gradients either way.
  auto gradients = [&](const data::Features& features, const std::vector<ColumnPtr>& columns,
                       std::vector<std::string>& names) {
    nn::VariableStore store;
    nn::ModelContext context(store);
    Tensor logits = linear_model(features, columns, context);
    names = store.names();
    std::vector<Tensor> variables;
    for (const std::string& name : names) variables.push_back(store.get(name).value);
    std::vector<float> flat;
    for (const Tensor& g : ops::gradients(ops::sum(logits), variables))
      if (g.defined())
        for (float v : g.to_vector<float>()) flat.push_back(v);
    return flat;
  };
  std::vector<ColumnPtr> moved(transform.columns.begin(), transform.columns.end());
  moved.push_back(numeric_column("hours"));
  std::vector<std::string> names_raw, names_moved;
  const auto expected = gradients(raw[1].features, all, names_raw);
  CHECK(names_raw.size() == 6);  // five columns' weights and the bias
  CHECK(std::count(expected.begin(), expected.end(), 0.0f) < static_cast<long>(expected.size()));
  CHECK(gradients(ready[1].features, moved, names_moved) == expected);
  CHECK(names_moved == names_raw);
  CHECK(contains(fmt::format("{}", fmt::join(names_raw, " ")),
                 "linear_model/education_X_occupation/weights"));

  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { transform.columns[0]->sparse_tensors(raw[0].features); }),
                 "map the batched dataset with map_fn"));
}
