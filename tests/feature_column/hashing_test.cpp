// FarmHash fingerprints, hash buckets and the hashed sparse cross against TensorFlow's own
// documented and tested outputs: the tf.strings.to_hash_bucket_fast docstring example, and
// the expected values in tensorflow/python/kernel_tests/sparse_ops/sparse_cross_op_test.py.
#include <doctest/doctest.h>

#include "feature_column/hashing.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::sparse_strings;

TEST_CASE("to_hash_bucket_fast matches the tf.strings.to_hash_bucket_fast docstring") {
  Tensor ids = string_to_hash_bucket_fast(data::string_tensor({"Hello", "TensorFlow", "2.x"}), 3);
  CHECK(ids.dtype() == DType::kI64);
  CHECK(ids.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 2});
  Tensor sparse =
      string_to_hash_bucket_fast(sparse_strings({0, 0, 1, 1}, {"Hello", "2.x"}, {2, 2}), 3);
  CHECK(sparse.is_sparse());
  CHECK(sparse.values().to_vector<int64_t>() == std::vector<int64_t>{0, 2});
}

TEST_CASE("sparse_cross_hashed matches sparse_cross_op_test's expected hashes") {
  std::vector<Tensor> inputs{sparse_strings({0, 0}, {"batch1-FC1-F1"}, {1, 1}),
                             sparse_strings({0, 0}, {"batch1-FC2-F1"}, {1, 1}),
                             sparse_strings({0, 0}, {"batch1-FC3-F1"}, {1, 1})};
  // test_hashed_zero_bucket_no_hash_key and test_hashed_zero_bucket.
  CHECK(sparse_cross_hashed(inputs).values().to_vector<int64_t>() ==
        std::vector<int64_t>{1971693436396284976});
  CHECK(sparse_cross_hashed(inputs, 0, kDefaultHashKey + 1).values().to_vector<int64_t>() ==
        std::vector<int64_t>{4847552627144134031});
}

TEST_CASE("sparse_cross_hashed follows the docstring's FingerprintCat64 chain and shapes") {
  // inputs[0] sparse [2, 2]: a; b c. inputs[1] sparse: d; e. inputs[2] dense [[f], [g]].
  std::vector<Tensor> inputs{sparse_strings({0, 0, 1, 0, 1, 1}, {"a", "b", "c"}, {2, 2}),
                             sparse_strings({0, 0, 1, 0}, {"d", "e"}, {2, 1}),
                             data::string_tensor({"f", "g"}, {2, 1})};
  Tensor crossed = sparse_cross_hashed(inputs, 0, 7);
  CHECK(crossed.shape() == Shape{2, 2});
  CHECK(crossed.indices().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 1, 1});
  auto chain = [](std::vector<std::string> values) {
    uint64_t h = 7;
    for (const auto& v : values) h = fingerprint_cat64(h, fingerprint64(v));
    return static_cast<int64_t>(h % static_cast<uint64_t>(INT64_MAX));
  };
  CHECK(crossed.values().to_vector<int64_t>() == std::vector<int64_t>{chain({"a", "d", "f"}),
                                                                      chain({"b", "e", "g"}),
                                                                      chain({"c", "e", "g"})});
  // An example with nothing in one input has no crosses.
  Tensor sparse_row = sparse_cross_hashed(
      {sparse_strings({1, 0}, {"x"}, {2, 1}), data::string_tensor({"p", "q"}, {2, 1})}, 10);
  CHECK(sparse_row.indices().to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(est::testing::contains(est::testing::error_message<InvalidArgumentError>([] {
                                 (void)sparse_cross_hashed({Tensor::zeros({2, 1})});
                               }),
                               "string or integer"));
}
