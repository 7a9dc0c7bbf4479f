// The two-output model (multi_output_util.h) through the bridges: model_to_estimator, save /
// load_model of the per-output compile config, and MirroredStrategy against one replica.
#include "tests/keras/multi_output_util.h"

using namespace multi_output;

TEST_CASE("keras two outputs: model_to_estimator evaluates as model.evaluate and trains") {
  TempDir keras_dir, est_dir;
  auto model = two_outputs(keras_dir.root.string(), 10);
  compile_weighted(*model);
  Data train = make_data(64, 11), test = make_data(20, 12);
  model->fit(by_name(train, 16), {.verbose = 0});
  auto keras_logs = model->evaluate(by_name(test, 8), {.verbose = 0});

  Estimator estimator = K::model_to_estimator(*model, {.model_dir = est_dir.root.string()});
  auto input_fn = [](data::Dataset ds) {
    return [ds](ModeKeys, const InputContext*) { return ds; };
  };
  Metrics before = estimator.evaluate(input_fn(by_name(test, 8)));
  CHECK(before.at("loss") == doctest::Approx(keras_logs.at("loss")).epsilon(1e-6));
  CHECK(before.at("cls_accuracy") == doctest::Approx(keras_logs.at("cls_accuracy")));
  CHECK(before.at("reg_mae") == doctest::Approx(keras_logs.at("reg_mae")).epsilon(1e-6));
  estimator.train(input_fn(by_name(train, 16).repeat()), {.steps = 40});
  Metrics after = estimator.evaluate(input_fn(by_name(test, 8)));
  CHECK(after.at("global_step") == 40);
  CHECK(after.at("loss") < before.at("loss"));
  // Predictions keyed by the output names, one row per example.
  auto predictions = estimator.predict(input_fn(by_name(test, 8)));
  REQUIRE(predictions.size() == 20);
  CHECK(predictions[0].at("cls").shape() == Shape{3});
  CHECK(predictions[0].at("reg").shape() == Shape{1});
}

TEST_CASE("keras two outputs: save and load_model keep the per-output compile config") {
  TempDir dir;
  auto model = two_outputs(dir / "model", 13, K::Regularizer{.l2 = 0.02});
  compile_weighted(*model);
  Data d = make_data(32, 14);
  model->fit(by_name(d, 16), {.verbose = 0});
  auto logs = model->evaluate(by_name(d, 16), {.verbose = 0});
  for (const char* file : {"two.keras", "two.h5"}) {
    CAPTURE(file);
    std::string path = dir / file;
    model->save(path);
    // Where Keras keeps it: config.json's compile_config, the .h5 file's training_config.
    std::string config_text, model_text;
    if (path.ends_with(".keras")) {
      for (const auto& [name, bytes] : K::read_zip(path))
        if (name == "config.json") config_text = bytes;
      model_text = config_text;
      config_text = nlohmann::json::parse(config_text)["compile_config"].dump();
    } else {
      auto file = K::H5File::read(path);
      config_text = file.read_string("/", "training_config").value_or("{}");
      model_text = file.read_string("/", "model_config").value_or("");
    }
    auto config = nlohmann::json::parse(config_text);
    CHECK(config["loss"]["cls"]["class_name"] == "SparseCategoricalCrossentropy");
    CHECK(config["loss"]["reg"] == "mse");
    CHECK(config["loss_weights"] == nlohmann::json{{"cls", 1.0}, {"reg", 0.5}});
    CHECK(config["metrics"] == nlohmann::json{{"cls", {"accuracy"}}, {"reg", {"mae"}}});
    // The trunk's kernel_regularizer in the model config, as regularizers.serialize writes it.
    nlohmann::json regularizer;
    const auto model_config = nlohmann::json::parse(model_text);
    for (const auto& layer : model_config["config"]["layers"])
      if (layer["config"]["name"] == "trunk") regularizer = layer["config"]["kernel_regularizer"];
    CHECK(regularizer["class_name"] == "L2");
    CHECK(regularizer["config"]["l2"] == 0.02);
    auto loaded = K::load_model(path);
    const auto& options = *loaded->compile_options();
    REQUIRE(std::holds_alternative<K::LossMap>(options.loss));
    const auto& losses = std::get<K::LossMap>(options.loss);
    CHECK(losses.size() == 2);
    CHECK(std::get<K::Loss>(*losses.at("cls")).name == "sparse_categorical_crossentropy");
    CHECK(std::get<K::Loss>(*losses.at("cls")).from_logits);
    CHECK(std::get<std::string>(*losses.at("reg")) == "mse");
    CHECK(options.loss_weights ==
          decltype(options.loss_weights)(K::LossWeightMap{{"cls", 1.0}, {"reg", 0.5}}));
    CHECK(options.metrics ==
          K::CompileMetrics(K::MetricMap{{"cls", {"accuracy"}}, {"reg", {"mae"}}}));
    auto loaded_logs = loaded->evaluate(by_name(d, 16), {.verbose = 0});
    CHECK(keys_of(loaded_logs) == keys_of(logs));
    for (const auto& [key, value] : loaded_logs)
      CHECK(value == doctest::Approx(logs.at(key)).epsilon(1e-6));
  }
}

TEST_CASE("keras two outputs under MirroredStrategy with 2 replicas equal one replica") {
  Data d = make_data(64, 15);
  auto run = [&](const std::string& model_dir, std::shared_ptr<distribute::Strategy> strategy) {
    auto model = two_outputs(model_dir, 16);
    model->config().train_distribute = std::move(strategy);  // as `with strategy.scope():`
    compile_weighted(*model);
    auto history = model->fit(by_name(d, 16), {.epochs = 2, .verbose = 0});
    return std::make_pair(history, weights_by_name(*model));
  };
  TempDir one, two;
  auto [single_history, single] = run(one.root.string(), nullptr);
  auto [mirrored_history, mirrored] = run(
      two.root.string(),
      std::make_shared<distribute::MirroredStrategy>(std::vector<std::string>{"/cpu:0", "/cpu:1"}));
  for (const char* name : kWeightNames)
    for (size_t r = 0; r < single[name].size(); ++r)
      for (size_t c = 0; c < single[name][r].size(); ++c)
        CHECK(mirrored[name][r][c] == doctest::Approx(single[name][r][c]).epsilon(1e-5));
  for (const char* key : {"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"})
    for (size_t e = 0; e < 2; ++e)
      CHECK(mirrored_history[key][e] == doctest::Approx(single_history[key][e]).epsilon(1e-5));
}
