// Categorical columns over raw ids and strings, after feature_column_v2.py's
// IdentityCategoricalColumn, VocabularyListCategoricalColumn, VocabularyFileCategoricalColumn
// and HashedCategoricalColumn.
//
// Each reads a raw feature (dense [batch, k], where "" and -1 count as absent, or sparse) and
// gives sparse int64 ids with the same indices:
//   - identity: the value itself, in [0, num_buckets); out of range becomes default_value, or
//     is an InvalidArgumentError without one;
//   - vocabulary (list or file): the value's position in the vocabulary; a value not in it
//     gets vocabulary_size + Fingerprint64(value) % num_oov_buckets when num_oov_buckets > 0,
//     else default_value (-1 by default: indicator and embedding columns then ignore it).
//     Integer values are hashed through their decimal string, as TF's lookup tables do;
//   - hash bucket: Fingerprint64(value) % hash_bucket_size (string_to_hash_bucket_fast), integer
//     values through their decimal string.
// Each holds its lookup as a LookupTable (lookup.h), which an export writes for est-serve; for
// a dense raw feature, dense_ids gives the ids in the feature's own [batch, k] layout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "feature_column/column.h"
#include "feature_column/lookup.h"

namespace est::feature_column {

class IdentityCategoricalColumn final : public CategoricalColumn {
 public:
  IdentityCategoricalColumn(std::string key, int64_t num_buckets,
                            std::optional<int64_t> default_value);
  std::string name() const override { return key_; }
  void add_parse_spec(FeatureSpecs& specs) const override;
  int64_t num_buckets() const override { return num_buckets_; }
  IdWeightPair sparse_tensors(const Features& features) const override;
  std::optional<Tensor> dense_ids(const Features& features) const override;
  const LookupTable& table() const { return lookup_.table(); }

 private:
  std::string key_;
  int64_t num_buckets_;
  std::optional<int64_t> default_value_;
  Lookup lookup_;
};

// The vocabulary of a list or a file: string or int64 keys in id order.
class VocabularyCategoricalColumn final : public CategoricalColumn {
 public:
  VocabularyCategoricalColumn(std::string key, std::vector<std::string> string_keys,
                              std::vector<int64_t> int_keys, DType dtype, int64_t default_value,
                              int64_t num_oov_buckets, std::string what,
                              std::string vocabulary_file = "");
  std::string name() const override { return key_; }
  void add_parse_spec(FeatureSpecs& specs) const override;
  int64_t num_buckets() const override { return vocabulary_size() + num_oov_buckets_; }
  IdWeightPair sparse_tensors(const Features& features) const override;
  std::optional<Tensor> dense_ids(const Features& features) const override;
  const LookupTable& table() const { return lookup_.table(); }
  int64_t vocabulary_size() const;

 private:
  std::string key_;
  std::vector<std::string> string_keys_;
  std::vector<int64_t> int_keys_;
  DType dtype_;
  int64_t default_value_;
  int64_t num_oov_buckets_;
  Lookup lookup_;
};

class HashedCategoricalColumn final : public CategoricalColumn {
 public:
  HashedCategoricalColumn(std::string key, int64_t hash_bucket_size, DType dtype);
  std::string name() const override { return key_; }
  void add_parse_spec(FeatureSpecs& specs) const override;
  int64_t num_buckets() const override { return hash_bucket_size_; }
  IdWeightPair sparse_tensors(const Features& features) const override;
  std::optional<Tensor> dense_ids(const Features& features) const override;
  const LookupTable& table() const { return lookup_.table(); }

 private:
  std::string key_;
  int64_t hash_bucket_size_;
  DType dtype_;
  Lookup lookup_;
};

std::shared_ptr<const IdentityCategoricalColumn> categorical_column_with_identity(
    std::string key, int64_t num_buckets, std::optional<int64_t> default_value = std::nullopt);

struct VocabularyOptions {
  int64_t default_value = -1;  // for values not in the vocabulary when num_oov_buckets is 0
  int64_t num_oov_buckets = 0;
};
std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_list(
    std::string key, std::vector<std::string> vocabulary_list, VocabularyOptions options = {});
std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_list(
    std::string key, std::vector<int64_t> vocabulary_list, VocabularyOptions options = {});

struct VocabularyFileOptions {
  std::optional<int64_t> vocabulary_size;  // the first lines only; none: every line
  int64_t num_oov_buckets = 0;
  std::optional<int64_t> default_value;  // -1 when not given
  DType dtype = DType::kString;          // kString, or kI64 for lines holding integers
};
// One key per line of `vocabulary_file`, its id the line number.
std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_file(
    std::string key, const std::string& vocabulary_file, VocabularyFileOptions options = {});

std::shared_ptr<const HashedCategoricalColumn> categorical_column_with_hash_bucket(
    std::string key, int64_t hash_bucket_size, DType dtype = DType::kString);

}  // namespace est::feature_column
