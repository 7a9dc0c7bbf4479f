// Lookup tables run on the host, and their report to an observing tracer (see lookup.h).
#include "feature_column/lookup.h"

#include <fmt/format.h>

#include "feature_column/hashing.h"
#include "ops/registry.h"

namespace est::feature_column {

int64_t LookupTable::vocabulary_size() const {
  return static_cast<int64_t>(key_dtype == DType::kString || kind == Kind::kIndexToString
                                  ? string_keys.size()
                                  : int_keys.size());
}

Lookup::Lookup(LookupTable table) : table_(std::move(table)) {
  if (table_.kind != LookupTable::Kind::kVocabulary) return;
  for (size_t i = 0; i < table_.string_keys.size(); ++i)
    string_index_.emplace(table_.string_keys[i], static_cast<int64_t>(i));
  for (size_t i = 0; i < table_.int_keys.size(); ++i)
    int_index_.emplace(table_.int_keys[i], static_cast<int64_t>(i));
}

int64_t Lookup::id(std::string_view key, const std::string& column) const {
  const auto oov = [&] {
    return table_.vocabulary_size() +
           static_cast<int64_t>(fingerprint64(key) % static_cast<uint64_t>(table_.num_oov_buckets));
  };
  switch (table_.kind) {
    case LookupTable::Kind::kVocabulary: {
      auto found = string_index_.find(std::string(key));
      if (found != string_index_.end()) return found->second;
      return table_.num_oov_buckets > 0 ? oov() : table_.default_value;
    }
    case LookupTable::Kind::kHashBucket:
      return static_cast<int64_t>(fingerprint64(key) % static_cast<uint64_t>(table_.num_buckets));
    default:
      throw InvalidArgumentError(
          fmt::format("categorical column '{}' looks up integers, got the string '{}'", column,
                      std::string(key)));
  }
}

int64_t Lookup::id(int64_t key, const std::string& column) const {
  switch (table_.kind) {
    case LookupTable::Kind::kVocabulary: {
      auto found = int_index_.find(key);
      if (found != int_index_.end()) return found->second;
      if (table_.num_oov_buckets == 0) return table_.default_value;
      return table_.vocabulary_size() +
             static_cast<int64_t>(fingerprint64(std::to_string(key)) %
                                  static_cast<uint64_t>(table_.num_oov_buckets));
    }
    case LookupTable::Kind::kHashBucket:
      return id(std::to_string(key), column);
    case LookupTable::Kind::kIdentity:
      if (key >= 0 && key < table_.num_buckets) return key;
      if (table_.has_default) return table_.default_value;
      throw InvalidArgumentError(fmt::format(
          "categorical_column_with_identity '{}': id {} is not in [0, {}); fix the data or give "
          "a default_value",
          column, key, table_.num_buckets));
    case LookupTable::Kind::kIndexToString:
      break;
  }
  throw InvalidArgumentError(
      fmt::format("'{}': an index-to-string table gives strings, not ids", column));
}

Tensor Lookup::ids(const Tensor& keys, const std::string& column, bool drop_ignored) const {
  const Tensor host = keys.to(ops::Device::cpu());
  const bool strings = host.dtype() == DType::kString;
  const bool integers = ops::is_integral(host.dtype());
  if (strings != (table_.key_dtype == DType::kString) || (!strings && !integers))
    throw InvalidArgumentError(fmt::format(
        "categorical column '{}': the feature holds {} values but the column expects {}", column,
        ops::dtype_name(host.dtype()),
        table_.key_dtype == DType::kString ? "strings" : "integers"));
  Tensor out = Tensor::empty(host.shape(), DType::kI64);
  int64_t* ids = out.data<int64_t>();
  if (strings) {
    const std::string* in = host.data<std::string>();
    for (int64_t i = 0; i < host.numel(); ++i)
      ids[i] = drop_ignored && in[i].empty() ? -1 : id(in[i], column);
  } else {
    const std::vector<int64_t> in = host.to_vector<int64_t>();
    for (size_t i = 0; i < in.size(); ++i)
      ids[i] = drop_ignored && in[i] == -1 ? -1 : id(in[i], column);
  }
  return out;
}

Tensor Lookup::strings(const Tensor& ids) const {
  const std::vector<int64_t> in = ids.to_vector<int64_t>();
  std::vector<std::string> out;
  out.reserve(in.size());
  const auto size = static_cast<int64_t>(table_.string_keys.size());
  for (int64_t id : in)
    out.push_back(id >= 0 && id < size ? table_.string_keys[static_cast<size_t>(id)] : "UNK");
  return Tensor::from_vector<std::string>(out, ids.shape());
}

void report_lookup(const std::string& name, const LookupTable& table, const Tensor& input,
                   const Tensor& output) {
  if (auto* observer = dynamic_cast<LookupObserver*>(ops::kernel_observer()))
    observer->lookup_ran(name, table, input, output);
}

}  // namespace est::feature_column
