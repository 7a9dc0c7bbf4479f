// crossed_column (see crossed.h).
#include "feature_column/crossed.h"

#include <algorithm>

#include <fmt/format.h>

#include "feature_column/categorical.h"

namespace est::feature_column {

CrossedColumn::CrossedColumn(std::vector<CrossKey> keys, int64_t hash_bucket_size,
                             uint64_t hash_key)
    : keys_(std::move(keys)), hash_bucket_size_(hash_bucket_size), hash_key_(hash_key) {
  if (keys_.size() < 2)
    throw InvalidArgumentError(
        fmt::format("crossed_column: keys must have at least two elements, got {}", keys_.size()));
  if (hash_bucket_size_ < 1)
    throw InvalidArgumentError(
        fmt::format("crossed_column: hash_bucket_size must be >= 1, got {}", hash_bucket_size_));
  for (const CrossKey& key : keys_) {
    if (const auto* column = std::get_if<CategoricalColumnPtr>(&key)) {
      if (!*column) throw InvalidArgumentError("crossed_column: a key column is null");
      if (dynamic_cast<const HashedCategoricalColumn*>(column->get()))
        throw InvalidArgumentError(
            "crossed_column: categorical_column_with_hash_bucket '" + (*column)->name() +
            "' is not supported for crossing; hashing before crossing increases collisions, "
            "cross the feature name as a string instead");
    } else if (std::get<std::string>(key).empty()) {
      throw InvalidArgumentError("crossed_column: a key is an empty feature name");
    }
  }
}

std::string CrossedColumn::name() const {
  std::vector<std::string> names;
  for (const CrossKey& key : keys_)
    names.push_back(std::holds_alternative<std::string>(key)
                        ? std::get<std::string>(key)
                        : std::get<CategoricalColumnPtr>(key)->name());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : "_X_") + name;
  return out;
}

std::vector<CrossKey> CrossedColumn::leaf_keys() const {
  std::vector<CrossKey> leaves;
  for (const CrossKey& key : keys_) {
    const auto* column = std::get_if<CategoricalColumnPtr>(&key);
    const auto* crossed = column ? dynamic_cast<const CrossedColumn*>(column->get()) : nullptr;
    if (!crossed) {
      leaves.push_back(key);
      continue;
    }
    std::vector<CrossKey> inner = crossed->leaf_keys();
    leaves.insert(leaves.end(), inner.begin(), inner.end());
  }
  return leaves;
}

void CrossedColumn::add_parse_spec(FeatureSpecs& specs) const {
  for (const CrossKey& key : keys_) {
    if (const auto* name = std::get_if<std::string>(&key))
      detail::add_spec(specs, *name, data::VarLenFeature{DType::kString});
    else
      std::get<CategoricalColumnPtr>(key)->add_parse_spec(specs);
  }
}

IdWeightPair CrossedColumn::sparse_tensors(const Features& features) const {
  std::vector<Tensor> inputs;
  for (const CrossKey& key : leaf_keys()) {
    if (const auto* feature = std::get_if<std::string>(&key)) {
      inputs.push_back(detail::raw_feature(features, *feature, name()));
      continue;
    }
    IdWeightPair ids = std::get<CategoricalColumnPtr>(key)->sparse_tensors(features);
    if (ids.weights.defined())
      throw InvalidArgumentError("crossed_column '" + name() + "': key column '" +
                                 std::get<CategoricalColumnPtr>(key)->name() +
                                 "' is weighted, which crossing does not support");
    inputs.push_back(ids.ids);
  }
  return {sparse_cross_hashed(inputs, hash_bucket_size_, hash_key_), {}};
}

std::shared_ptr<const CrossedColumn> crossed_column(std::vector<CrossKey> keys,
                                                    int64_t hash_bucket_size, uint64_t hash_key) {
  return std::make_shared<const CrossedColumn>(std::move(keys), hash_bucket_size, hash_key);
}

}  // namespace est::feature_column
