// prefetch_to_device on the CPU: prefetch(n) under another name (elements unchanged, state
// resumable), the argument checks, and the error for a GPU where none can be used. The GPU
// behaviour is in gpu_prefetch_test.cpp.
#include <doctest/doctest.h>

#include "data/data.h"
#include "ops/backend.h"
#include "tests/data/test_util.h"
#include "tests/skip.h"

using namespace est;
using namespace est::data;
using est::testing::check_resume;
using est::testing::drain;
using est::testing::serialized;

namespace {

Element features_of(Element e) {
  const double v = e.value.item();
  return Element(Features{{"x", Tensor::full({3}, v)}},
                 Tensor::scalar(static_cast<double>(v) * 2, DType::kI64));
}

}  // namespace

TEST_CASE("prefetch_to_device on a CPU yields the input's elements unchanged") {
  auto ds = Dataset::range(40).map(features_of).batch(3);
  const auto expected = serialized(drain(ds));
  for (int64_t buffer : {int64_t{1}, int64_t{4}, kAutotune}) {
    CAPTURE(buffer);
    CHECK(serialized(drain(ds.prefetch_to_device(ops::Device::cpu(), buffer))) == expected);
    CHECK(serialized(drain(ds.prefetch_to_device("/cpu:0", buffer))) == expected);
  }
  for (const Element& e : drain(ds.prefetch_to_device("/cpu:0")))
    CHECK(e.features.at("x").device().is_cpu());
}

TEST_CASE("prefetch_to_device on a CPU resumes exactly from a saved state") {
  check_resume(Dataset::range(100).map(features_of).shuffle(10, 3).prefetch_to_device("/cpu:0", 6),
               {0, 1, 7, 50, 99});
  check_resume(Dataset::range(30).batch(4).prefetch_to_device(ops::Device::cpu(), 1), {0, 3});
}

TEST_CASE("prefetch_to_device checks its buffer size") {
  CHECK_THROWS_AS(Dataset::range(3).prefetch_to_device("/cpu:0", 0), InvalidArgumentError);
  CHECK_THROWS_AS(Dataset::range(3).prefetch_to_device("/cpu:0", -5), InvalidArgumentError);
}

TEST_CASE("prefetch_to_device to a GPU where none can be used says so when iterated") {
  if (ops::backend_available(ops::Backend::kCuda))
    return est::testing::skip("a GPU is present (gpu_prefetch_test covers it)");
  auto ds = Dataset::range(3).prefetch_to_device("/gpu:0");  // building the pipeline is fine
  CHECK_THROWS_AS(ds.iterator(), FailedPreconditionError);
}
