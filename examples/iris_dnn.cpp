// TensorFlow's premade-estimator tutorial (Iris, DNNClassifier with hidden_units {30, 10} and
// 3 classes), in est. The tutorial downloads iris_training.csv / iris_test.csv; this program
// writes its own Iris-like CSVs instead (no network): 120 training and 30 test flowers drawn
// from normal distributions with the per-species means and standard deviations of Fisher's
// Iris measurements, under the tutorial's column names, then trains, evaluates and predicts
// the tutorial's three examples.
//
//   iris_dnn [--model_dir DIR] [--steps 5000] [--data_dir DIR] [--seed 1]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <est/est.h>

namespace {

const std::vector<std::string> kFeatures = {"SepalLength", "SepalWidth", "PetalLength",
                                            "PetalWidth"};
const std::vector<std::string> kSpecies = {"Setosa", "Versicolor", "Virginica"};
// Per species: mean and standard deviation of each measurement (cm) in Fisher's data.
const double kMean[3][4] = {
    {5.006, 3.428, 1.462, 0.246}, {5.936, 2.770, 4.260, 1.326}, {6.588, 2.974, 5.552, 2.026}};
const double kStd[3][4] = {
    {0.352, 0.379, 0.174, 0.105}, {0.516, 0.314, 0.470, 0.198}, {0.636, 0.322, 0.552, 0.275}};

// `rows` flowers, species in turn, as CSV with a header: the four measurements then Species.
void write_csv(const std::string& path, int rows, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::ofstream out(path);
  out << "SepalLength,SepalWidth,PetalLength,PetalWidth,Species\n";
  for (int i = 0; i < rows; ++i) {
    const int species = i % 3;
    for (int f = 0; f < 4; ++f)
      out << fmt::format("{:.1f},",
                         std::max(0.1, kMean[species][f] + kStd[species][f] * normal(generator)));
    out << species << "\n";
  }
  if (!out) throw est::UnavailableError("iris_dnn: could not write " + path);
}

est::data::CsvOptions csv_options() {
  est::data::CsvOptions options;
  for (const std::string& name : kFeatures) options.columns.push_back({.name = name});
  options.columns.push_back({.name = "Species", .dtype = est::DType::kI64});
  options.label_name = "Species";
  return options;
}

est::InputFn input_fn(const std::string& path, bool training) {
  return [path, training](est::ModeKeys, const est::InputContext*) {
    est::data::Dataset ds = est::data::csv_dataset({path}, csv_options());
    if (training) ds = ds.shuffle(1000, 1).repeat();
    return ds.batch(training ? 32 : 30);
  };
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, data_dir = "/tmp/iris_data";
  int64_t steps = 5000;
  uint64_t seed = 1;
  CLI::App app("TensorFlow's premade-estimator tutorial: Iris with a DNNClassifier.", "iris_dnn");
  app.add_option("--model_dir", model_dir, "checkpoints go here (default: a temporary directory)");
  app.add_option("--data_dir", data_dir, "where the generated CSVs are written");
  app.add_option("--steps", steps, "training steps (the tutorial's 5000)");
  app.add_option("--seed", seed, "RunConfig's tf_random_seed");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::create_directories(data_dir);
  const std::string train_path = data_dir + "/iris_training.csv";
  const std::string test_path = data_dir + "/iris_test.csv";
  write_csv(train_path, 120, 1);
  write_csv(test_path, 30, 2);

  std::vector<est::feature_column::DenseColumnPtr> columns;
  for (const std::string& name : kFeatures)
    columns.push_back(est::feature_column::numeric_column(name));
  // Two hidden layers of 30 and 10 nodes, three classes (the tutorial's classifier).
  // A fixed seed (the tutorial leaves it random) so that the README's figures reproduce.
  est::DNNClassifier classifier({.hidden_units = {30, 10},
                                 .feature_columns = columns,
                                 .model_dir = model_dir,
                                 .n_classes = 3,
                                 .config = {.tf_random_seed = seed}});
  classifier.train(input_fn(train_path, true), {.steps = steps});
  est::Metrics metrics = classifier.evaluate(input_fn(test_path, false));
  fmt::print("\nTest set accuracy: {:.3f}\n\n", metrics.at("accuracy"));

  // The tutorial's three unlabeled flowers.
  const std::vector<std::vector<float>> examples = {
      {5.1f, 5.9f, 6.9f}, {3.3f, 3.0f, 3.1f}, {1.7f, 4.2f, 5.4f}, {0.5f, 1.5f, 2.1f}};
  const std::vector<std::string> expected = {"Setosa", "Versicolor", "Virginica"};
  est::InputFn predict_fn = [&](est::ModeKeys, const est::InputContext*) {
    est::Features features;
    for (size_t f = 0; f < kFeatures.size(); ++f)
      features[kFeatures[f]] = est::Tensor::from_vector(examples[f]);
    return est::data::Dataset::from_tensor_slices(features).batch(3);
  };
  std::vector<est::Predictions> predictions = classifier.predict(predict_fn);
  for (size_t i = 0; i < predictions.size(); ++i) {
    const auto class_id = static_cast<size_t>(predictions[i].at("class_ids").item());
    const double probability = predictions[i].at("probabilities").to_vector<double>().at(class_id);
    fmt::print("Prediction is \"{}\" ({:.1f}%), expected \"{}\"\n", kSpecies[class_id],
               100 * probability, expected[i]);
  }
  return 0;
} catch (const std::exception& error) {
  fmt::print(stderr, "iris_dnn: {}\n", error.what());
  return 1;
}
