// Vocabulary remapping for warm start, as TF's _warm_start_var_with_vocab with
// checkpoint_ops._load_and_remap_matrix_initializer (warm_starting_util.py, checkpoint_ops.py):
// entry i of the new vocabulary takes the old tensor's row (axis 0) or column (axis 1) of the
// same entry in the old vocabulary (its first old_vocab_size entries); entries the old
// vocabulary lacks and the num_oov_buckets rows (columns) after the vocabulary take the backup
// initializer's values (zeros by default). A 1-D variable (a bias) is one column.
#include <fmt/format.h>

#include <fstream>
#include <unordered_map>

#include "checkpoint/warm_start.h"
#include "ops/array_ops.h"
#include "ops/error.h"
#include "ops/text_line.h"

namespace est::checkpoint {
namespace {

std::vector<std::string> read_vocab(const std::string& path, int64_t limit, const char* field,
                                    const std::string& variable) {
  std::ifstream in(path);
  if (!in)
    throw NotFoundError(
        fmt::format("Warm start of \"{}\": cannot read the {} file {}", variable, field, path));
  std::vector<std::string> entries;
  for (std::string line; (limit < 0 || static_cast<int64_t>(entries.size()) < limit) &&
                         ops::read_text_line(in, line);)
    entries.push_back(line);
  if (limit >= 0 && static_cast<int64_t>(entries.size()) < limit)
    throw InvalidArgumentError(fmt::format(
        "Warm start of \"{}\": the {} file {} has {} entries, fewer than the {} asked for",
        variable, field, path, entries.size(), limit));
  return entries;
}

}  // namespace

VocabRemap remap_with_vocab(const std::string& name, const Tensor& target, const Tensor& old_value,
                            const VocabInfo& info) {
  auto fail = [&](const std::string& message) {
    throw InvalidArgumentError(
        fmt::format("Warm start of \"{}\" with a vocabulary: {}", name, message));
  };
  if (info.axis != 0 && info.axis != 1) fail(fmt::format("axis must be 0 or 1, got {}", info.axis));
  if (info.new_vocab.empty() || info.old_vocab.empty() || info.new_vocab_size <= 0)
    fail("VocabInfo needs new_vocab, a positive new_vocab_size and old_vocab");
  if (info.num_oov_buckets < 0) fail("num_oov_buckets must not be negative");
  auto as_matrix = [&](const Shape& shape, const char* which) {
    if (shape.size() == 1) return Shape{shape[0], 1};
    if (shape.size() != 2)
      fail(
          fmt::format("the {} is {}; only 1-D and 2-D variables can be "
                      "remapped",
                      which, ops::shape_str(shape)));
    return shape;
  };
  Shape new_shape = as_matrix(target.shape(), "variable");
  Shape old_shape = as_matrix(old_value.shape(), "checkpoint's tensor");
  int axis = target.shape().size() == 1 ? 0 : info.axis;
  int other = 1 - axis;
  if (new_shape[axis] != info.new_vocab_size + info.num_oov_buckets)
    fail(
        fmt::format("its shape {} has {} along axis {}, but new_vocab_size {} + num_oov_buckets "
                    "{} = {}",
                    ops::shape_str(target.shape()), new_shape[axis], axis, info.new_vocab_size,
                    info.num_oov_buckets, info.new_vocab_size + info.num_oov_buckets));
  if (new_shape[other] != old_shape[other])
    fail(
        fmt::format("the variable is {} and the checkpoint's tensor {}: they must agree along "
                    "axis {}",
                    ops::shape_str(target.shape()), ops::shape_str(old_value.shape()), other));

  std::vector<std::string> new_vocab =
      read_vocab(info.new_vocab, info.new_vocab_size, "new_vocab", name);
  std::vector<std::string> old_vocab =
      read_vocab(info.old_vocab, info.old_vocab_size, "old_vocab", name);
  std::unordered_map<std::string, int64_t> old_index;
  for (size_t i = 0; i < old_vocab.size() && static_cast<int64_t>(i) < old_shape[axis]; ++i)
    old_index.emplace(old_vocab[i], static_cast<int64_t>(i));

  ops::Generator generator(0);
  Tensor backup = info.backup_initializer
                      ? info.backup_initializer(target.shape(), target.dtype(), generator)
                      : Tensor::zeros(target.shape(), target.dtype());
  std::vector<double> values = backup.to_vector<double>();
  std::vector<double> old = old_value.to_vector<double>();
  auto at = [](const Shape& shape, int64_t row, int64_t column) { return row * shape[1] + column; };
  VocabRemap result;
  for (int64_t i = 0; i < info.new_vocab_size; ++i) {
    auto found = old_index.find(new_vocab[i]);
    if (found == old_index.end()) continue;
    ++result.copied;
    for (int64_t k = 0; k < new_shape[other]; ++k) {
      if (axis == 0)
        values[at(new_shape, i, k)] = old[at(old_shape, found->second, k)];
      else
        values[at(new_shape, k, i)] = old[at(old_shape, k, found->second)];
    }
  }
  result.value = ops::cast(Tensor::from_vector(values, target.shape()), target.dtype());
  return result;
}

}  // namespace est::checkpoint
