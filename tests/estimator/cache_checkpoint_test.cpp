// A checkpoint taken while the input's cache() is still filling carries the input's position,
// not the cache's contents or a shuffle buffer of elements, and training resumed from it
// continues exactly as an uninterrupted run.
#include "checkpoint/reader.h"
#include "data/state.h"
#include "estimator_test_util.h"

using namespace est;
using namespace est_test;

namespace {

constexpr int64_t kPadding = 256;  // floats per example that the model ignores: 1 KiB

// 64 examples with a 1 KiB "padding" feature, cached, shuffled with a buffer of 32, batches
// of 4: after 5 steps the cache has read 52 examples and the buffer holds 32.
InputFn cached_input_fn() {
  return [](ModeKeys, const InputContext*) {
    Tensor x = Tensor::from_vector(feature_values(64), {64, 2});
    Tensor y = Tensor::from_vector(label_values(64), {64, 1});
    return data::Dataset::from_tensor_slices(Features{{"x", x}}, y)
        .map([](data::Element e) {
          e.features.emplace("padding", Tensor::full({kPadding}, 0.5));
          return e;
        })
        .cache()
        .shuffle(32, 7)
        .repeat()
        .batch(4);
  };
}

std::vector<float> kernel_of(const Estimator& estimator) {
  return estimator.get_variable_value("dense/kernel").to_vector<float>();
}

}  // namespace

TEST_CASE("a checkpoint taken while cache() fills holds a position and resumes exactly") {
  TempDir reference_dir, resumed_dir;
  RunConfig reference_config = quiet_config(reference_dir.str());
  Estimator reference(linear_model_fn, reference_config);
  reference.train(cached_input_fn(), {.max_steps = 12});

  {
    Estimator first(linear_model_fn, quiet_config(resumed_dir.str()));
    first.train(cached_input_fn(), {.steps = 5});
  }
  checkpoint::TensorBundle saved = checkpoint::load(resumed_dir / "model.ckpt-5.h5");
  const checkpoint::Blob* position = saved.find_blob("iterator");
  REQUIRE(position != nullptr);
  const size_t one_example =
      data::serialize_element(
          data::Element(Features{{"padding", Tensor::full({kPadding}, 0.5)}}, Tensor::zeros({1})))
          .size();
  // 32 buffered examples would be 32 KiB and more; row numbers and a position are not one.
  CHECK_MESSAGE(position->bytes.size() < one_example, position->bytes.size());

  Estimator second(linear_model_fn, quiet_config(resumed_dir.str()));
  second.train(cached_input_fn(), {.max_steps = 12});
  CHECK(kernel_of(second) == kernel_of(reference));
  CHECK(second.get_variable_value("dense/bias").to_vector<float>() ==
        reference.get_variable_value("dense/bias").to_vector<float>());
}
