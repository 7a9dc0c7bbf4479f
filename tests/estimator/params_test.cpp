// Params as TF's `params` dict: lists (hidden_units), feature columns and nested Params beside
// scalars, through typed getters whose errors name the key (with its path inside nested Params),
// the type found and the type asked for; and a model_fn reading them inside an Estimator.
#include <doctest/doctest.h>

#include "estimator_test_util.h"
#include "feature_column/categorical.h"
#include "feature_column/input_layer.h"
#include "feature_column/numeric.h"

using namespace est_test;
using est::Params;

TEST_CASE("Params hold lists, feature columns and nested Params") {
  namespace fc = est::feature_column;
  Params params{{"hidden_units", {10, 10}},
                {"dropout_rates", {0.5, 0.25}},
                {"classes", {"cat", "dog"}},
                {"learning_rate", 0.05},
                {"optimizer", "Adagrad"},
                {"steps", 3},
                {"feature_columns", est::FeatureColumns{fc::numeric_column("x", {.shape = {2}})}},
                {"optimizer_args", Params{{"initial_accumulator_value", 0.1},
                                          {"schedule", Params{{"decay_steps", 100}}}}}};
  CHECK(params.get_int_list("hidden_units") == std::vector<int64_t>{10, 10});
  CHECK(params.get_double_list("hidden_units") == std::vector<double>{10, 10});  // ints widen
  CHECK(params.get_double_list("dropout_rates") == std::vector<double>{0.5, 0.25});
  CHECK(params.get_string_list("classes") == std::vector<std::string>{"cat", "dog"});
  CHECK(params.get_int("steps") == 3);
  CHECK(params.get_string("optimizer") == "Adagrad");
  REQUIRE(params.get_feature_columns("feature_columns").size() == 1);
  CHECK(params.get_feature_columns("feature_columns")[0]->name() == "x");
  const Params& optimizer_args = params.get_params("optimizer_args");
  CHECK(optimizer_args.get_double("initial_accumulator_value") == 0.1);
  CHECK(optimizer_args.get_params("schedule").get_int("decay_steps") == 100);
  CHECK(params.get_int_list("missing", {1, 2}) == std::vector<int64_t>{1, 2});

  // Vectors and typed column lists convert too; set() replaces.
  params.set("hidden_units", std::vector<int>{30, 10});
  CHECK(params.get_int_list("hidden_units") == std::vector<int64_t>{30, 10});
  std::vector<std::shared_ptr<const fc::NumericColumn>> numeric{fc::numeric_column("a"),
                                                                fc::numeric_column("b")};
  params.set("numeric", numeric);
  CHECK(params.get_feature_columns("numeric").size() == 2);

  // Errors name the key, the type found and the one asked for; nested keys with their path.
  CHECK_THROWS_WITH_AS(params.get_int("hidden_units"),
                       "params: parameter 'hidden_units' is a list of int64, asked for as a int64",
                       est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(params.get_int_list("dropout_rates"),
                       doctest::Contains("'dropout_rates' is a list of double"),
                       est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(params.get_params("optimizer"),
                       doctest::Contains("'optimizer' is a string, asked for as a nested Params"),
                       est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(optimizer_args.get_params("schedule").get_string("decay_steps"),
                       doctest::Contains("'optimizer_args/schedule/decay_steps' is a int64"),
                       est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(optimizer_args.get_int("missing"),
                       doctest::Contains("'optimizer_args/missing'"), est::NotFoundError);
  params.set("mixed", est::FeatureColumns{fc::numeric_column("n"),
                                          fc::categorical_column_with_identity("id", 4)});
  CHECK(params.get_dense_columns("numeric").size() == 2);
  CHECK_THROWS_WITH_AS(params.get_dense_columns("mixed"),
                       doctest::Contains("feature column 'id' of 'mixed' is not a dense column"),
                       est::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(params.get_feature_columns("classes"),
                       doctest::Contains("is a list of string, asked for as a list of feature "
                                         "columns"),
                       est::InvalidArgumentError);
}

TEST_CASE("a model_fn builds its layers from Params' hidden_units and feature columns") {
  namespace fc = est::feature_column;
  TempDir dir;
  Params params{{"hidden_units", {4, 3}},
                {"feature_columns", est::FeatureColumns{fc::numeric_column("x", {.shape = {2}})}},
                {"optimizer", Params{{"learning_rate", 0.05}}}};
  auto model_fn = [](const est::Features& features, const Tensor& labels, est::ModeKeys mode,
                     est::ModelContext& ctx) {
    const Params& params = est::params(ctx);
    Tensor x = fc::input_layer(features, params.get_dense_columns("feature_columns"), ctx);
    for (int64_t units : params.get_int_list("hidden_units"))
      x = est::nn::dense(ctx, x, {.units = units, .activation = est::nn::relu});
    Tensor prediction = est::nn::dense(ctx, x, {.units = 1});
    Tensor loss = est::nn::mean_squared_error(labels, prediction);
    double learning_rate = params.get_params("optimizer").get_double("learning_rate");
    return est::EstimatorSpec({.mode = mode,
                               .loss = loss,
                               .train_op = est::optim::sgd(learning_rate).minimize(loss, ctx)});
  };
  est::Estimator estimator(model_fn, quiet_config(dir.str()), params);
  estimator.train(linear_input_fn(16, 8), {.steps = 2});
  CHECK(estimator.get_variable_value("dense/kernel").shape() == est::Shape{2, 4});
  CHECK(estimator.get_variable_value("dense_1/kernel").shape() == est::Shape{4, 3});
  CHECK(estimator.get_variable_value("dense_2/kernel").shape() == est::Shape{3, 1});
}
