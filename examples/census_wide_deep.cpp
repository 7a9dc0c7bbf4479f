// A census-style wide & deep job (TensorFlow's wide_deep / "Large-scale linear models"
// tutorial on the Census Income data) through train_and_evaluate. The real adult.data is not
// downloaded: the program writes its own CSVs with the census columns' kinds (age and
// hours_per_week numbers, education and gender from short vocabularies, occupation free text
// hashed into buckets, the income_bracket label as the strings "<=50K" / ">50K") drawn from a
// fixed model in which age, education, occupation, hours and the education x occupation pair
// change the odds of the higher bracket. The columns are the tutorial's:
//   wide: bucketized age, education, hashed occupation, gender, education x occupation and
//         age buckets x education crosses (a linear model);
//   deep: age, hours_per_week, education and gender as indicators, an embedding of occupation
//         (a DNN of 100, 75, 50 and 25 units).
// The estimator keeps TF's defaults, as the tutorial does: Ftrl for the wide part (learning
// rate min(0.005, 1/sqrt(6))), Adagrad 0.001 for the deep part.
//
//   census_wide_deep [--model_dir DIR] [--data_dir DIR] [--steps 4000] [--seed 1]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <est/est.h>

namespace fc = est::feature_column;

namespace {

const std::vector<std::string> kEducation = {"HS-grad",   "Some-college", "Bachelors",
                                             "Masters",   "Doctorate",    "11th",
                                             "Assoc-voc", "Prof-school"};
const double kEducationEffect[] = {-0.6, -0.3, 0.6, 1.0, 1.4, -1.2, -0.2, 1.5};
const std::vector<std::string> kOccupation = {
    "Exec-managerial", "Prof-specialty",    "Craft-repair",     "Adm-clerical", "Sales",
    "Other-service",   "Machine-op-inspct", "Transport-moving", "Tech-support", "Farming-fishing"};
const double kOccupationEffect[] = {1.0, 0.9, -0.1, -0.4, 0.2, -1.3, -0.6, -0.4, 0.3, -0.9};

// `rows` people as CSV: age,education,occupation,gender,hours_per_week,income_bracket.
void write_csv(const std::string& path, int rows, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> age(17, 80), education(0, 7), occupation(0, 9), gender(0, 1);
  std::normal_distribution<double> hours(40, 10);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::ofstream out(path);
  out << "age,education,occupation,gender,hours_per_week,income_bracket\n";
  for (int i = 0; i < rows; ++i) {
    const int a = age(generator), e = education(generator), o = occupation(generator);
    const int g = gender(generator);
    const double h = std::clamp(hours(generator), 1.0, 99.0);
    // Earnings peak in mid-career; professional degrees pay most in professional jobs.
    double logit = -1.6 + 0.08 * (a - 17) - 0.0012 * (a - 17) * (a - 17) + kEducationEffect[e] +
                   kOccupationEffect[o] + 0.03 * (h - 40) + (g == 1 ? 0.4 : 0.0);
    if (e >= 3 && o <= 1) logit += 1.0;
    const bool rich = uniform(generator) < 1 / (1 + std::exp(-logit));
    out << fmt::format("{},{},{},{},{:.0f},{}\n", a, kEducation[e], kOccupation[o],
                       g == 1 ? "Male" : "Female", h, rich ? ">50K" : "<=50K");
  }
  if (!out) throw est::UnavailableError("census_wide_deep: could not write " + path);
}

est::InputFn input_fn(const std::string& path, bool training) {
  est::data::CsvOptions options;
  options.columns = {{.name = "age"},
                     {.name = "education", .dtype = est::DType::kString},
                     {.name = "occupation", .dtype = est::DType::kString},
                     {.name = "gender", .dtype = est::DType::kString},
                     {.name = "hours_per_week"},
                     {.name = "income_bracket", .dtype = est::DType::kString}};
  options.label_name = "income_bracket";
  return [path, options, training](est::ModeKeys, const est::InputContext* context) {
    est::data::Dataset ds = est::data::csv_dataset({path}, options);
    if (context) ds = ds.shard(context->num_input_pipelines, context->input_pipeline_id);
    if (training) ds = ds.shuffle(10000, 1).repeat();
    return ds.batch(64);
  };
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, data_dir = "/tmp/census_data";
  int64_t steps = 4000;
  uint64_t seed = 1;
  CLI::App app("A census-style wide & deep classifier through train_and_evaluate.",
               "census_wide_deep");
  app.add_option("--model_dir", model_dir, "checkpoints go here (default: a temporary directory)");
  app.add_option("--data_dir", data_dir, "where the generated CSVs are written");
  app.add_option("--steps", steps, "training steps");
  app.add_option("--seed", seed, "RunConfig's tf_random_seed");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::create_directories(data_dir);
  const std::string train_path = data_dir + "/adult.data.csv";
  const std::string test_path = data_dir + "/adult.test.csv";
  write_csv(train_path, 16000, 1);
  write_csv(test_path, 4000, 2);

  auto age = fc::numeric_column("age");
  auto hours = fc::numeric_column("hours_per_week");
  auto age_buckets = fc::bucketized_column(age, {18, 25, 30, 35, 40, 45, 50, 55, 60, 65});
  auto education = fc::categorical_column_with_vocabulary_list("education", kEducation);
  auto gender = fc::categorical_column_with_vocabulary_list(
      "gender", std::vector<std::string>{"Female", "Male"});
  auto occupation = fc::categorical_column_with_hash_bucket("occupation", 1000);
  std::vector<fc::ColumnPtr> wide = {age_buckets,
                                     education,
                                     occupation,
                                     gender,
                                     fc::crossed_column({"education", "occupation"}, 1000),
                                     fc::crossed_column({age_buckets, "education"}, 1000)};
  std::vector<fc::DenseColumnPtr> deep = {age, hours, fc::indicator_column(education),
                                          fc::indicator_column(gender),
                                          fc::embedding_column(occupation, 8)};

  est::RunConfig config{.model_dir = model_dir,
                        .tf_random_seed = seed,  // fixed so that the README's figures reproduce
                        .save_checkpoints_steps = 1000,
                        .save_checkpoints_secs = std::nullopt};
  est::DNNLinearCombinedClassifier classifier({.linear_feature_columns = wide,
                                               .dnn_feature_columns = deep,
                                               .dnn_hidden_units = {100, 75, 50, 25},
                                               .label_vocabulary = {"<=50K", ">50K"},
                                               .config = config});
  auto [metrics, exports] = est::train_and_evaluate(
      classifier, {.input_fn = input_fn(train_path, true), .max_steps = steps},
      {.input_fn = input_fn(test_path, false), .steps = {}, .throttle_secs = 0});
  fmt::print("\nTest set: accuracy {:.4f}, auc {:.4f}, accuracy_baseline {:.4f}\n",
             metrics.at("accuracy"), metrics.at("auc"), metrics.at("accuracy_baseline"));
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "census_wide_deep: {}\n", error.what());
  return 1;
}
