// Identity, vocabulary (list, file) and hash-bucket categorical columns (see categorical.h).
#include "feature_column/categorical.h"

#include <charconv>
#include <fstream>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "ops/text_line.h"

namespace est::feature_column {
namespace {

Tensor sparse_input(const Features& features, const std::string& key) {
  Tensor sparse = detail::to_sparse_dropping_ignored(detail::raw_feature(features, key, key));
  return Tensor::sparse(sparse.indices().to(ops::Device::cpu()),
                        sparse.values().to(ops::Device::cpu()), sparse.shape());
}

// The ids of `lookup` over the column's raw feature, sparse (ignore values dropped).
IdWeightPair sparse_ids(const Features& features, const std::string& key, const Lookup& lookup) {
  const Tensor input = sparse_input(features, key);
  return {detail::with_values(input, lookup.ids(input.values(), key, false)), {}};
}

// The ids of `lookup` over a dense raw feature, reported to an observing tracer.
std::optional<Tensor> dense_lookup(const Features& features, const std::string& key,
                                   const Lookup& lookup) {
  const Tensor raw = detail::raw_feature(features, key, key);
  if (raw.is_sparse() || raw.rank() != 2) return std::nullopt;
  Tensor ids = lookup.ids(raw, key);
  report_lookup(key, lookup.table(), raw, ids);
  return ids;
}

LookupTable identity_table(int64_t num_buckets, std::optional<int64_t> default_value) {
  return {.kind = LookupTable::Kind::kIdentity,
          .key_dtype = DType::kI64,
          .default_value = default_value.value_or(-1),
          .has_default = default_value.has_value(),
          .num_buckets = num_buckets};
}

}  // namespace

IdentityCategoricalColumn::IdentityCategoricalColumn(std::string key, int64_t num_buckets,
                                                     std::optional<int64_t> default_value)
    : key_(std::move(key)),
      num_buckets_(num_buckets),
      default_value_(default_value),
      lookup_(identity_table(num_buckets, default_value)) {
  if (num_buckets_ < 1)
    throw InvalidArgumentError(
        fmt::format("categorical_column_with_identity '{}': num_buckets must be >= 1, got {}", key_,
                    num_buckets_));
  if (default_value_ && (*default_value_ < 0 || *default_value_ >= num_buckets_))
    throw InvalidArgumentError(
        fmt::format("categorical_column_with_identity '{}': default_value {} is not in [0, {})",
                    key_, *default_value_, num_buckets_));
}

void IdentityCategoricalColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_, data::VarLenFeature{DType::kI64});
}

IdWeightPair IdentityCategoricalColumn::sparse_tensors(const Features& features) const {
  return sparse_ids(features, key_, lookup_);
}

std::optional<Tensor> IdentityCategoricalColumn::dense_ids(const Features& features) const {
  return dense_lookup(features, key_, lookup_);
}

VocabularyCategoricalColumn::VocabularyCategoricalColumn(std::string key,
                                                         std::vector<std::string> string_keys,
                                                         std::vector<int64_t> int_keys, DType dtype,
                                                         int64_t default_value,
                                                         int64_t num_oov_buckets, std::string what,
                                                         std::string vocabulary_file)
    : key_(std::move(key)),
      string_keys_(std::move(string_keys)),
      int_keys_(std::move(int_keys)),
      dtype_(dtype),
      default_value_(default_value),
      num_oov_buckets_(num_oov_buckets),
      lookup_({.kind = LookupTable::Kind::kVocabulary,
               .key_dtype = dtype_,
               .string_keys = string_keys_,
               .int_keys = int_keys_,
               .vocabulary_file = std::move(vocabulary_file),
               .num_oov_buckets = num_oov_buckets_,
               .default_value = default_value_}) {
  if (vocabulary_size() < 1)
    throw InvalidArgumentError(fmt::format("{} '{}': the vocabulary is empty", what, key_));
  if (num_oov_buckets_ < 0)
    throw InvalidArgumentError(
        fmt::format("{} '{}': num_oov_buckets must be >= 0, got {}", what, key_, num_oov_buckets_));
  if (num_oov_buckets_ > 0 && default_value_ != -1)
    throw InvalidArgumentError(
        fmt::format("{} '{}': can't specify both default_value and num_oov_buckets", what, key_));
  std::unordered_map<std::string, int> seen;
  for (int64_t i = 0; i < vocabulary_size(); ++i) {
    std::string k = dtype_ == DType::kString ? string_keys_[static_cast<size_t>(i)]
                                             : std::to_string(int_keys_[static_cast<size_t>(i)]);
    if (seen[k]++)
      throw InvalidArgumentError(
          fmt::format("{} '{}': duplicate key '{}' in the vocabulary", what, key_, k));
  }
}

int64_t VocabularyCategoricalColumn::vocabulary_size() const {
  return static_cast<int64_t>(dtype_ == DType::kString ? string_keys_.size() : int_keys_.size());
}

void VocabularyCategoricalColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_, data::VarLenFeature{dtype_});
}

IdWeightPair VocabularyCategoricalColumn::sparse_tensors(const Features& features) const {
  return sparse_ids(features, key_, lookup_);
}

std::optional<Tensor> VocabularyCategoricalColumn::dense_ids(const Features& features) const {
  return dense_lookup(features, key_, lookup_);
}

HashedCategoricalColumn::HashedCategoricalColumn(std::string key, int64_t hash_bucket_size,
                                                 DType dtype)
    : key_(std::move(key)),
      hash_bucket_size_(hash_bucket_size),
      dtype_(dtype),
      lookup_({.kind = LookupTable::Kind::kHashBucket,
               .key_dtype = dtype,
               .num_buckets = hash_bucket_size}) {
  if (hash_bucket_size_ < 1)
    throw InvalidArgumentError(fmt::format(
        "categorical_column_with_hash_bucket '{}': hash_bucket_size must be >= 1, got {}", key_,
        hash_bucket_size_));
  // feature_column_v2.py: string or any integer dtype (integers hash as their decimal strings).
  if (dtype_ != DType::kString && !ops::is_integral(dtype_))
    throw InvalidArgumentError(fmt::format(
        "categorical_column_with_hash_bucket '{}': dtype must be string or an integer type "
        "(int32, int64, uint8), got {}",
        key_, ops::dtype_name(dtype_)));
}

void HashedCategoricalColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_, data::VarLenFeature{dtype_});
}

IdWeightPair HashedCategoricalColumn::sparse_tensors(const Features& features) const {
  return sparse_ids(features, key_, lookup_);
}

std::optional<Tensor> HashedCategoricalColumn::dense_ids(const Features& features) const {
  return dense_lookup(features, key_, lookup_);
}

std::shared_ptr<const IdentityCategoricalColumn> categorical_column_with_identity(
    std::string key, int64_t num_buckets, std::optional<int64_t> default_value) {
  return std::make_shared<const IdentityCategoricalColumn>(std::move(key), num_buckets,
                                                           default_value);
}

std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_list(
    std::string key, std::vector<std::string> vocabulary_list, VocabularyOptions options) {
  return std::make_shared<const VocabularyCategoricalColumn>(
      std::move(key), std::move(vocabulary_list), std::vector<int64_t>{}, DType::kString,
      options.default_value, options.num_oov_buckets, "categorical_column_with_vocabulary_list");
}

std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_list(
    std::string key, std::vector<int64_t> vocabulary_list, VocabularyOptions options) {
  return std::make_shared<const VocabularyCategoricalColumn>(
      std::move(key), std::vector<std::string>{}, std::move(vocabulary_list), DType::kI64,
      options.default_value, options.num_oov_buckets, "categorical_column_with_vocabulary_list");
}

std::shared_ptr<const VocabularyCategoricalColumn> categorical_column_with_vocabulary_file(
    std::string key, const std::string& vocabulary_file, VocabularyFileOptions options) {
  const std::string what = "categorical_column_with_vocabulary_file '" + key + "'";
  if (options.dtype != DType::kString && options.dtype != DType::kI64)
    throw InvalidArgumentError(what + ": dtype must be string or int64");
  if (options.vocabulary_size && *options.vocabulary_size < 1)
    throw InvalidArgumentError(what + ": vocabulary_size must be >= 1");
  if (options.num_oov_buckets > 0 && options.default_value)
    throw InvalidArgumentError(what + ": can't specify both default_value and num_oov_buckets");
  std::ifstream file(vocabulary_file);
  if (!file) throw NotFoundError(what + ": cannot open vocabulary file '" + vocabulary_file + "'");
  std::vector<std::string> lines;
  for (std::string line; ops::read_text_line(file, line);) {
    if (options.vocabulary_size && static_cast<int64_t>(lines.size()) == *options.vocabulary_size)
      break;
    lines.push_back(std::move(line));
  }
  if (options.vocabulary_size && static_cast<int64_t>(lines.size()) < *options.vocabulary_size)
    throw InvalidArgumentError(fmt::format("{}: vocabulary_size is {} but '{}' has only {} lines",
                                           what, *options.vocabulary_size, vocabulary_file,
                                           lines.size()));
  std::vector<int64_t> ints;
  if (options.dtype == DType::kI64)
    for (size_t i = 0; i < lines.size(); ++i) {
      int64_t value = 0;
      const std::string& line = lines[i];
      auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
      if (error != std::errc() || end != line.data() + line.size())
        throw InvalidArgumentError(fmt::format("{}: line {} of '{}' ('{}') is not an int64", what,
                                               i + 1, vocabulary_file, line));
      ints.push_back(value);
    }
  return std::make_shared<const VocabularyCategoricalColumn>(
      std::move(key),
      options.dtype == DType::kString ? std::move(lines) : std::vector<std::string>{},
      std::move(ints), options.dtype, options.default_value.value_or(-1), options.num_oov_buckets,
      "categorical_column_with_vocabulary_file", vocabulary_file);
}

std::shared_ptr<const HashedCategoricalColumn> categorical_column_with_hash_bucket(
    std::string key, int64_t hash_bucket_size, DType dtype) {
  return std::make_shared<const HashedCategoricalColumn>(std::move(key), hash_bucket_size, dtype);
}

}  // namespace est::feature_column
