// Identity, vocabulary (list, file) and hash-bucket categorical columns (see categorical.h).
#include "feature_column/categorical.h"

#include <charconv>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>

#include "feature_column/hashing.h"

namespace est::feature_column {
namespace {

// The ids' source values as int64 (integer features) or strings.
void require_kind(const Tensor& values, DType expected, const std::string& column) {
  const bool is_int = values.dtype() == DType::kI64 || values.dtype() == DType::kI32;
  if (expected == DType::kString ? values.dtype() != DType::kString : !is_int)
    throw InvalidArgumentError(fmt::format(
        "categorical column '{}': the feature holds {} values but the column expects {}", column,
        ops::dtype_name(values.dtype()), expected == DType::kString ? "strings" : "integers"));
}

Tensor sparse_input(const Features& features, const std::string& key) {
  Tensor sparse = detail::to_sparse_dropping_ignored(detail::raw_feature(features, key, key));
  return Tensor::sparse(sparse.indices().to(ops::Device::cpu()),
                        sparse.values().to(ops::Device::cpu()), sparse.shape());
}

// Fingerprint64 of each value (integers through their decimal string) modulo `buckets`.
int64_t hash_bucket(const Tensor& values, int64_t i, int64_t buckets) {
  const std::string text =
      values.dtype() == DType::kString
          ? values.data<std::string>()[i]
          : std::to_string(values.dtype() == DType::kI64 ? values.data<int64_t>()[i]
                                                         : values.data<int32_t>()[i]);
  return static_cast<int64_t>(fingerprint64(text) % static_cast<uint64_t>(buckets));
}

}  // namespace

IdentityCategoricalColumn::IdentityCategoricalColumn(std::string key, int64_t num_buckets,
                                                     std::optional<int64_t> default_value)
    : key_(std::move(key)), num_buckets_(num_buckets), default_value_(default_value) {
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
  const Tensor input = sparse_input(features, key_);
  require_kind(input.values(), DType::kI64, key_);
  std::vector<int64_t> ids = input.values().to_vector<int64_t>();
  for (int64_t& id : ids)
    if (id < 0 || id >= num_buckets_) {
      if (!default_value_)
        throw InvalidArgumentError(fmt::format(
            "categorical_column_with_identity '{}': id {} is not in [0, {}); fix the data or give "
            "a default_value",
            key_, id, num_buckets_));
      id = *default_value_;
    }
  return {detail::with_values(input, Tensor::from_vector(ids)), {}};
}

VocabularyCategoricalColumn::VocabularyCategoricalColumn(std::string key,
                                                         std::vector<std::string> string_keys,
                                                         std::vector<int64_t> int_keys, DType dtype,
                                                         int64_t default_value,
                                                         int64_t num_oov_buckets, std::string what)
    : key_(std::move(key)),
      string_keys_(std::move(string_keys)),
      int_keys_(std::move(int_keys)),
      dtype_(dtype),
      default_value_(default_value),
      num_oov_buckets_(num_oov_buckets) {
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
  const Tensor input = sparse_input(features, key_);
  const Tensor& values = input.values();
  require_kind(values, dtype_, key_);
  std::vector<int64_t> ids(static_cast<size_t>(values.numel()));
  if (dtype_ == DType::kString) {
    std::unordered_map<std::string_view, int64_t> table;
    for (size_t i = 0; i < string_keys_.size(); ++i)
      table.emplace(string_keys_[i], static_cast<int64_t>(i));
    for (int64_t i = 0; i < values.numel(); ++i) {
      auto found = table.find(values.data<std::string>()[i]);
      ids[static_cast<size_t>(i)] =
          found != table.end()   ? found->second
          : num_oov_buckets_ > 0 ? vocabulary_size() + hash_bucket(values, i, num_oov_buckets_)
                                 : default_value_;
    }
  } else {
    std::unordered_map<int64_t, int64_t> table;
    for (size_t i = 0; i < int_keys_.size(); ++i)
      table.emplace(int_keys_[i], static_cast<int64_t>(i));
    const std::vector<int64_t> keys = values.to_vector<int64_t>();
    for (size_t i = 0; i < keys.size(); ++i) {
      auto found = table.find(keys[i]);
      ids[i] =
          found != table.end() ? found->second
          : num_oov_buckets_ > 0
              ? vocabulary_size() + hash_bucket(values, static_cast<int64_t>(i), num_oov_buckets_)
              : default_value_;
    }
  }
  return {detail::with_values(input, Tensor::from_vector(ids)), {}};
}

HashedCategoricalColumn::HashedCategoricalColumn(std::string key, int64_t hash_bucket_size,
                                                 DType dtype)
    : key_(std::move(key)), hash_bucket_size_(hash_bucket_size), dtype_(dtype) {
  if (hash_bucket_size_ < 1)
    throw InvalidArgumentError(fmt::format(
        "categorical_column_with_hash_bucket '{}': hash_bucket_size must be >= 1, got {}", key_,
        hash_bucket_size_));
  if (dtype_ != DType::kString && dtype_ != DType::kI64)
    throw InvalidArgumentError(fmt::format(
        "categorical_column_with_hash_bucket '{}': dtype must be string or int64", key_));
}

void HashedCategoricalColumn::add_parse_spec(FeatureSpecs& specs) const {
  detail::add_spec(specs, key_, data::VarLenFeature{dtype_});
}

IdWeightPair HashedCategoricalColumn::sparse_tensors(const Features& features) const {
  const Tensor input = sparse_input(features, key_);
  const Tensor& values = input.values();
  require_kind(values, dtype_, key_);
  std::vector<int64_t> ids(static_cast<size_t>(values.numel()));
  for (int64_t i = 0; i < values.numel(); ++i)
    ids[static_cast<size_t>(i)] = hash_bucket(values, i, hash_bucket_size_);
  return {detail::with_values(input, Tensor::from_vector(ids)), {}};
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
  for (std::string line; std::getline(file, line);) {
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
      "categorical_column_with_vocabulary_file");
}

std::shared_ptr<const HashedCategoricalColumn> categorical_column_with_hash_bucket(
    std::string key, int64_t hash_bucket_size, DType dtype) {
  return std::make_shared<const HashedCategoricalColumn>(std::move(key), hash_bucket_size, dtype);
}

}  // namespace est::feature_column
