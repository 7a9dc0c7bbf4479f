// The lookup tables of the categorical columns (and of a classifier's label_vocabulary), held
// as data: a LookupTable says what a lookup does, a Lookup runs it. The columns compute their
// ids with it, and est-serve's pre-processing step (export/lookup_step.h) runs the same
// description from signatures.json, so a served request gets the column's ids bit for bit.
// Followed: tensorflow/python/feature_column/feature_column_v2.py (the columns' lookups) and
// tensorflow/python/ops/lookup_ops.py (index_table_from_tensor / _from_file with
// num_oov_buckets and default_value, index_to_string_table_from_tensor).
//
//   - vocabulary: a key's position in the keys; a key not there gets
//     vocabulary_size + Fingerprint64(key) % num_oov_buckets when num_oov_buckets > 0, else
//     default_value. Integer keys hash through their decimal string, as TF's tables do;
//   - hash bucket: Fingerprint64(key) % num_buckets (string_to_hash_bucket_fast);
//   - identity: the key itself in [0, num_buckets); else default_value when has_default, or
//     an InvalidArgumentError naming the column;
//   - index to string: the string at the id (a classifier's label_vocabulary), "UNK" outside.
// Dense inputs keep their shape: TF's ignore values ("" for strings, -1 for integers) give -1,
// the id that indicator and embedding columns skip.
//
// When a lookup runs while the export tracer observes this thread (export/trace.h), the column
// reports it (report_lookup) so the export writes it as a lookup instead of refusing a value
// computed on the host; the tracer is a LookupObserver besides an ops::KernelObserver.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ops/tensor.h"

namespace est::feature_column {

using ops::DType;
using ops::Tensor;

struct LookupTable {
  enum class Kind : uint8_t { kVocabulary, kHashBucket, kIdentity, kIndexToString };
  Kind kind = Kind::kVocabulary;
  DType key_dtype = DType::kString;      // the keys looked up: kString or kI64
  std::vector<std::string> string_keys;  // a string vocabulary; index_to_string's strings
  std::vector<int64_t> int_keys;         // an int64 vocabulary
  std::string vocabulary_file;           // the file the vocabulary was read from, or ""
  int64_t num_oov_buckets = 0;           // vocabulary
  int64_t default_value = -1;            // vocabulary; identity when has_default
  bool has_default = false;              // identity
  int64_t num_buckets = 0;               // hash bucket: hash_bucket_size; identity

  int64_t vocabulary_size() const;
  bool operator==(const LookupTable&) const = default;
};

class Lookup {
 public:
  explicit Lookup(LookupTable table);
  const LookupTable& table() const { return table_; }

  // One key's id (column names the caller in errors).
  int64_t id(std::string_view key, const std::string& column) const;
  int64_t id(int64_t key, const std::string& column) const;
  // int64 ids of `keys` (strings, or int32/int64 integers), same shape; ignore values give -1
  // when `drop_ignored`. InvalidArgumentError for the wrong kind of keys.
  Tensor ids(const Tensor& keys, const std::string& column, bool drop_ignored = true) const;
  // index to string: the strings of integer `ids`, same shape.
  Tensor strings(const Tensor& ids) const;

 private:
  LookupTable table_;
  std::unordered_map<std::string, int64_t> string_index_;
  std::unordered_map<int64_t, int64_t> int_index_;
};

// Sees lookups run while it observes this thread (the export tracer).
class LookupObserver {
 public:
  virtual ~LookupObserver() = default;
  // `output` is `table` applied to `input` by `name` (a column, "label_vocabulary").
  virtual void lookup_ran(const std::string& name, const LookupTable& table, const Tensor& input,
                          const Tensor& output) = 0;
};

// Tells this thread's kernel observer, when it is a LookupObserver, that `output` is `table`
// applied to `input`.
void report_lookup(const std::string& name, const LookupTable& table, const Tensor& input,
                   const Tensor& output);

}  // namespace est::feature_column
