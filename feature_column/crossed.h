// crossed_column, after CrossedColumn in tensorflow/python/feature_column/feature_column_v2.py:
// the hashed cross (sparse_cross_hashed) of its keys' values, where a key is a raw feature's
// name (its values, strings or integers, crossed as they are) or a categorical column (its ids);
// a crossed key contributes its own keys (crosses flatten). Its name joins the keys' names,
// sorted, with "_X_".
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "feature_column/column.h"
#include "feature_column/hashing.h"

namespace est::feature_column {

using CrossKey = std::variant<std::string, CategoricalColumnPtr>;

class CrossedColumn final : public CategoricalColumn {
 public:
  CrossedColumn(std::vector<CrossKey> keys, int64_t hash_bucket_size, uint64_t hash_key);
  std::string name() const override;
  void add_parse_spec(FeatureSpecs& specs) const override;
  int64_t num_buckets() const override { return hash_bucket_size_; }
  IdWeightPair sparse_tensors(const Features& features) const override;
  const std::vector<CrossKey>& keys() const { return keys_; }

 private:
  std::vector<CrossKey> leaf_keys() const;  // nested crosses flattened
  std::vector<CrossKey> keys_;
  int64_t hash_bucket_size_;
  uint64_t hash_key_;
};

// At least two keys; hash_bucket_size >= 1. A hash-bucket column as a key is refused (as in TF:
// hashing before crossing adds collisions; cross the raw feature's name instead).
std::shared_ptr<const CrossedColumn> crossed_column(std::vector<CrossKey> keys,
                                                    int64_t hash_bucket_size,
                                                    uint64_t hash_key = kDefaultHashKey);

}  // namespace est::feature_column
