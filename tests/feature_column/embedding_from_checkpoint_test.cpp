// embedding_column initialised from another checkpoint's tensor, TF's ckpt_to_load_from /
// tensor_name_in_ckpt (feature_column_v2.py, through checkpoint_utils.init_from_checkpoint):
// the lookup reads the checkpoint's rows (the table and ids of feature_column_v2_test's
// embedding test, so the expected lookups are TF's); missing tensors, wrong shapes and
// half-given arguments are clear errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "checkpoint/init_from_checkpoint.h"
#include "checkpoint/variable_store_io.h"
#include "checkpoint/writer.h"
#include "feature_column/feature_column.h"
#include "tests/checkpoint/helpers.h"
#include "tests/feature_column/test_util.h"

using namespace est;
using namespace est::feature_column;
using est::testing::contains;
using est::testing::error_message;
using est::testing::sparse_numbers;

namespace {

// A checkpoint holding "old/embedding" [3, 2] = (1, 2), (3, 5), (7, 11) at `path`.
void write_checkpoint(const std::string& path) {
  nn::VariableStore store;
  store.create("old/embedding", Tensor::from_vector<float>({1, 2, 3, 5, 7, 11}, {3, 2}), true);
  checkpoint::save(path, checkpoint::bundle_from_store(store));
}

// Example 0 [2], example 1 [0, 1], example 2 [], example 3 [1] (TF's embedding test ids).
Features ids() {
  return {{"aaa", sparse_numbers<int64_t>({0, 0, 1, 0, 1, 4, 3, 0}, {2, 0, 1, 1}, {4, 5})}};
}

}  // namespace

TEST_CASE("embedding_column reads its table from ckpt_to_load_from / tensor_name_in_ckpt") {
  est::testing::TempDir dir;
  const std::string path = dir / "model.ckpt-7.h5";
  write_checkpoint(path);
  nn::VariableStore store;
  nn::ModelContext context(store);
  auto column = embedding_column(
      categorical_column_with_identity("aaa", 3), 2,
      {.initializer = checkpoint::initializer_from_checkpoint(path, "old/embedding")});
  Tensor lookups = column->dense_tensor(ids(), &context);
  CHECK(lookups.to_vector<float>() == std::vector<float>{7, 11, 2, 3.5f, 0, 0, 3, 5});
  CHECK(store.get("embedding_weights").value.to_vector<float>() ==
        std::vector<float>{1, 2, 3, 5, 7, 11});

  // A tensor of another shape, a tensor that is not there, half the arguments.
  nn::VariableStore other;
  nn::ModelContext other_context(other);
  auto wide = embedding_column(
      categorical_column_with_identity("aaa", 3), 4,
      {.initializer = checkpoint::initializer_from_checkpoint(path, "old/embedding")});
  std::string message =
      error_message<InvalidArgumentError>([&] { wide->dense_tensor(ids(), &other_context); });
  CHECK(contains(message, "old/embedding"));
  CHECK(contains(message, "[3, 4]"));
  nn::VariableStore third;
  nn::ModelContext third_context(third);
  auto missing = embedding_column(
      categorical_column_with_identity("aaa", 3), 2,
      {.initializer = checkpoint::initializer_from_checkpoint(path, "old/nothing")});
  CHECK_THROWS_AS(missing->dense_tensor(ids(), &third_context), NotFoundError);
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { checkpoint::initializer_from_checkpoint(path, ""); }),
                 "tensor_name_in_ckpt"));
}
