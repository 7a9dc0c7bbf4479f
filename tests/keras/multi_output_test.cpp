// A functional model with two inputs and two outputs (multi_output_util.h): compile's per-output
// losses, loss weights and metrics, fit's step against the weighted loss's gradient written out by
// hand, Keras's log names, evaluate / predict, y as a map or a tuple, fit and evaluate on tensors,
// and the errors for keys that name no output.
#include "tests/keras/multi_output_util.h"

using namespace multi_output;

TEST_CASE("keras two outputs: fit's step is the weighted loss's gradient step, Keras's logs") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 5);
  compile_weighted(*model);
  CHECK(model->output_names() == std::vector<std::string>{"cls", "reg"});
  CHECK(model->input_names() == std::vector<std::string>{"a", "b"});
  Data d = make_data(16, 1);
  auto before = weights_by_name(*model);  // the step-0 weights fit starts from
  HandStep hand = hand_step(d, before);
  K::History history = model->fit(by_name(d, 16), {.verbose = 0});  // one step of all 16 rows

  std::set<std::string> keys;
  for (const auto& [key, values] : history.history) keys.insert(key);
  CHECK(keys == std::set<std::string>{"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"});
  CHECK(history["loss"][0] == doctest::Approx(hand.loss).epsilon(1e-6));
  CHECK(history["cls_loss"][0] == doctest::Approx(hand.cls_loss).epsilon(1e-6));
  CHECK(history["reg_loss"][0] == doctest::Approx(hand.reg_loss).epsilon(1e-6));  // unweighted
  CHECK(history["cls_accuracy"][0] == doctest::Approx(hand.cls_accuracy));
  CHECK(history["reg_mae"][0] == doctest::Approx(hand.reg_mae).epsilon(1e-6));

  CHECK(sgd_step_error(before, weights_by_name(*model), hand.grad, 0.1) < 1e-6);
}

TEST_CASE("keras two outputs: a kernel regularizer's penalty joins the total loss and its step") {
  TempDir dir;
  const K::Regularizer l1l2{.l1 = 0.001, .l2 = 0.01};
  auto model = two_outputs(dir.root.string(), 5, l1l2);
  compile_weighted(*model);
  Data d = make_data(16, 1);
  auto before = weights_by_name(*model);
  HandStep hand = hand_step(d, before, l1l2);
  K::History history = model->fit(by_name(d, 16), {.verbose = 0});
  // "loss" includes the penalty; the outputs' losses do not.
  CHECK(history["loss"][0] == doctest::Approx(hand.loss).epsilon(1e-6));
  CHECK(history["loss"][0] > history["cls_loss"][0] + 0.5 * history["reg_loss"][0] + 1e-4);
  CHECK(history["cls_loss"][0] == doctest::Approx(hand.cls_loss).epsilon(1e-6));
  CHECK(sgd_step_error(before, weights_by_name(*model), hand.grad, 0.1) < 1e-6);
}

TEST_CASE("keras two outputs: evaluate, predict, validation logs; y as a map or a tuple") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 6);
  compile_weighted(*model, 0.05);
  Data train = make_data(64, 2), test = make_data(24, 3);
  auto history = model->fit(by_name(train, 16),
                            {.epochs = 2, .validation_data = by_name(test, 8), .verbose = 0});
  for (const char* key :
       {"val_loss", "val_cls_loss", "val_reg_loss", "val_cls_accuracy", "val_reg_mae"})
    CHECK(history[key].size() == 2);
  CHECK(history["loss"][1] < history["loss"][0]);

  auto logs = model->evaluate(by_name(test, 8), {.verbose = 0});
  CHECK(keys_of(logs) ==
        std::set<std::string>{"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"});
  CHECK(logs["loss"] == doctest::Approx(logs["cls_loss"] + 0.5 * logs["reg_loss"]).epsilon(1e-6));
  CHECK(logs["loss"] == doctest::Approx(history["val_loss"][1]).epsilon(1e-6));

  // y as a tuple in output order, x by Input name: the same evaluation.
  auto tuple = K::from_tensor_slices(data::Features{{"a", test.ta()}, {"b", test.tb()}},
                                     std::vector<Tensor>{test.tcls(), test.treg()})
                   .batch(8);
  auto tuple_logs = model->evaluate(tuple, {.verbose = 0});
  for (const auto& [key, value] : tuple_logs)
    CHECK(value == doctest::Approx(logs.at(key)).epsilon(1e-6));

  // predict: one tensor per output, in output order; its values give evaluate's losses.
  auto predicted = model->predict(by_name(test, 8));
  REQUIRE(predicted.size() == 2);
  CHECK(predicted[0].shape() == Shape{24, 3});
  CHECK(predicted[1].shape() == Shape{24, 1});
  auto reg = predicted[1].to_vector<float>();
  double mse = 0;
  for (int64_t i = 0; i < 24; ++i) mse += std::pow(reg[i] - test.reg[i], 2) / 24;
  CHECK(logs["reg_loss"] == doctest::Approx(mse).epsilon(1e-5));
}

TEST_CASE("keras two outputs: fit and evaluate on tensors equal the same rows as a dataset") {
  Data train = make_data(48, 4), test = make_data(20, 5);
  TempDir dir_a, dir_b;
  auto on_dataset = two_outputs(dir_a.root.string(), 8);
  auto on_tensors = two_outputs(dir_b.root.string(), 8);
  compile_weighted(*on_dataset, 0.05);
  compile_weighted(*on_tensors, 0.05);
  // Keras's fit(x=[a, b], y={"cls": ..., "reg": ...}, batch_size=16, shuffle=False,
  // validation_split=0.25): the last 12 rows are the validation data.
  auto history = on_tensors->fit(
      std::vector<Tensor>{train.ta(), train.tb()},
      K::Targets{{"cls", train.tcls()}, {"reg", train.treg()}},
      {.epochs = 2, .verbose = 0, .batch_size = 16, .validation_split = 0.25, .shuffle = false});
  auto take = [](const Data& d, int64_t begin, int64_t count) {
    Data out{count, {}, {}, {}, {}};
    out.a.assign(d.a.begin() + begin * 2, d.a.begin() + (begin + count) * 2);
    out.b.assign(d.b.begin() + begin * 3, d.b.begin() + (begin + count) * 3);
    out.cls.assign(d.cls.begin() + begin, d.cls.begin() + begin + count);
    out.reg.assign(d.reg.begin() + begin, d.reg.begin() + begin + count);
    return out;
  };
  auto expected = on_dataset->fit(
      by_name(take(train, 0, 36), 16),
      {.epochs = 2, .validation_data = by_name(take(train, 36, 12), 16), .verbose = 0});
  for (const char* key : {"loss", "cls_loss", "reg_loss", "val_loss", "val_cls_accuracy"}) {
    REQUIRE(history[key].size() == 2);
    for (size_t e = 0; e < 2; ++e)
      CHECK(history[key][e] == doctest::Approx(expected[key][e]).epsilon(1e-6));
  }
  // evaluate: x by Input name, y as a tuple in output order.
  auto logs =
      on_tensors->evaluate(data::Features{{"a", test.ta()}, {"b", test.tb()}},
                           std::vector<Tensor>{test.tcls(), test.treg()}, {.verbose = 0}, 8);
  auto want = on_tensors->evaluate(by_name(test, 8), {.verbose = 0});
  for (const auto& [key, value] : want) CHECK(logs.at(key) == doctest::Approx(value).epsilon(1e-6));
  // Tensors whose rows differ: an error naming the shapes.
  CHECK_THROWS_WITH_AS(
      on_tensors->evaluate(std::vector<Tensor>{train.ta(), test.tb()},
                           K::Targets{{"cls", test.tcls()}, {"reg", test.treg()}}, {.verbose = 0}),
      doctest::Contains("the same number of rows"), InvalidArgumentError);
}

TEST_CASE("keras two outputs: 'accuracy' for every output picks each one's accuracy") {
  TempDir dir;
  K::clear_session();
  auto x = K::Input({5}, "x");
  auto digit = (*L::Dense({.units = 3, .name = "digit"}))(x);
  auto flag = (*L::Dense({.units = 1, .activation = "sigmoid", .name = "flag"}))(x);
  K::Model both({x}, {digit, flag});
  both.config().model_dir = dir.root.string();
  both.config().tf_random_seed = 4;
  // One loss list in output order, no weights, one flat metric list for every output.
  both.compile(
      {.optimizer = "sgd",
       .loss = K::LossList{K::losses::SparseCategoricalCrossentropy(true), "binary_crossentropy"},
       .metrics = {"accuracy"}});
  Data d = make_data(40, 7);
  std::vector<float> x5(40 * 5), bits(40);
  for (int64_t i = 0; i < 40; ++i) {
    for (int j = 0; j < 5; ++j) x5[i * 5 + j] = d.x(i, j);
    bits[i] = d.reg[i] > 0 ? 1.f : 0.f;
  }
  auto ds = K::from_tensor_slices(
                data::Features{{"x", Tensor::from_vector(x5, {40, 5})}},
                K::Targets{{"digit", d.tcls()}, {"flag", Tensor::from_vector(bits, {40})}})
                .batch(10);
  auto logs = both.evaluate(ds, {.verbose = 0});
  CHECK(keys_of(logs) == std::set<std::string>{"loss", "digit_loss", "flag_loss", "digit_accuracy",
                                               "flag_accuracy"});
  CHECK(logs["loss"] == doctest::Approx(logs["digit_loss"] + logs["flag_loss"]).epsilon(1e-6));
  auto predicted = both.predict(ds);
  auto logits = predicted[0].to_vector<float>();
  auto p = predicted[1].to_vector<float>();
  double sparse = 0, binary = 0;
  for (int64_t i = 0; i < 40; ++i) {
    int64_t argmax = std::max_element(&logits[i * 3], &logits[i * 3] + 3) - &logits[i * 3];
    sparse += (argmax == d.cls[i]) / 40.0;
    binary += ((p[i] > 0.5f ? 1.f : 0.f) == bits[i]) / 40.0;
  }
  CHECK(logs["digit_accuracy"] == doctest::Approx(sparse));  // sparse_categorical_accuracy
  CHECK(logs["flag_accuracy"] == doctest::Approx(binary));   // binary_accuracy

  // One y tensor for both outputs: each output takes it (_conform_to_outputs broadcasts it).
  auto one_y =
      data::Dataset::from_tensor_slices(data::Features{{"x", Tensor::from_vector(x5, {40, 5})}},
                                        Tensor::from_vector(bits, {40}))
          .batch(10);
  auto shared = both.evaluate(one_y, {.verbose = 0});
  CHECK(shared["flag_loss"] == doctest::Approx(logs["flag_loss"]).epsilon(1e-6));
  CHECK(shared["flag_accuracy"] == doctest::Approx(binary));
  CHECK(shared["digit_loss"] != doctest::Approx(logs["digit_loss"]));  // digit took the bits
}

TEST_CASE("keras two outputs: keys that name no output are errors naming the outputs") {
  TempDir dir;
  auto model = two_outputs(dir.root.string(), 8);
  std::string wrong_loss = message_of([&] {
    model->compile({.loss = K::LossMap{{"cls", "mse"}, {"regression", "mse"}}});
  });
  CHECK(wrong_loss.find("'regression'") != std::string::npos);
  CHECK(wrong_loss.find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = "mse", .loss_weights = K::LossWeightMap{{"clss", 1.0}}});
        }).find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] { model->compile({.loss = K::LossList{"mse"}}); }).find("2 outputs") !=
        std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = "mse", .metrics = K::MetricMap{{"out", {"mae"}}}});
        }).find("['cls', 'reg']") != std::string::npos);
  CHECK(message_of([&] {
          model->compile({.loss = K::LossList{std::nullopt, std::nullopt}});
        }).find("no loss for any") != std::string::npos);

  compile_weighted(*model);
  Data d = make_data(8, 9);
  auto wrong_y = K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()},
                                       K::Targets{{"cls", d.tcls()}, {"regr", d.treg()}})
                     .batch(8);
  std::string wrong_label = message_of([&] { model->evaluate(wrong_y, {.verbose = 0}); });
  CHECK(wrong_label.find("'regr'") != std::string::npos);
  CHECK(wrong_label.find("['cls', 'reg']") != std::string::npos);
  auto missing_y =
      K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()}, K::Targets{{"cls", d.tcls()}})
          .batch(8);
  CHECK(message_of([&] { model->fit(missing_y, {.verbose = 0}); }).find("\"reg\"") !=
        std::string::npos);
  auto short_y =
      K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb()}, std::vector<Tensor>{d.tcls()})
          .batch(8);
  CHECK(message_of([&] {
          model->evaluate(short_y, {.verbose = 0});
        }).find("has 2 outputs ['cls', 'reg'] but the batch's y is a tuple of 1") !=
        std::string::npos);
  auto long_x = K::from_tensor_slices(std::vector<Tensor>{d.ta(), d.tb(), d.ta()},
                                      std::vector<Tensor>{d.tcls(), d.treg()})
                    .batch(8);
  CHECK(message_of([&] {
          model->evaluate(long_x, {.verbose = 0});
        }).find("has 2 inputs ['a', 'b'] but the batch's x is a tuple of 3") != std::string::npos);
  CHECK(message_of([&] {
          K::pack_x_y(data::Features{{"a#1", d.ta()}});
        }).find("'#'") != std::string::npos);
}
