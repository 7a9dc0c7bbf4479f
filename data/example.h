// tf.train.Example: parsing with a feature spec, as tf.io.parse_single_example / parse_example,
// and building/serialising examples for writers and tests.
//
// Parsing uses the Protobuf classes generated from data/proto/example.proto (wire-compatible
// with TensorFlow's) and follows tensorflow/core/util/example_proto_fast_parsing.cc: output
// dtypes float_list -> float32, int64_list -> int64 (kept exact, never through a double),
// bytes_list -> string (tf.string), or for a kU8 spec one byte string as uint8 [length] (raw
// bytes such as encoded images). A feature that is present but has no list set counts as
// missing, so its default applies, as in TF.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "data/dataset.h"
#include "data/file_stream.h"

namespace est::data {

// A feature with the same number of values in every example.
struct FixedLenFeature {
  Shape shape;                // per example; {} for a single value
  DType dtype = DType::kF32;  // kF32, kI64, kString, or kU8 for bytes as uint8
  // Used when an example lacks the feature; without one a missing feature is an error. Each
  // holds one value (broadcast) or shape's count.
  std::optional<std::vector<double>> default_value;   // kF32; kI64 where a double holds it exactly
  std::optional<std::string> default_bytes;           // for kU8
  std::optional<std::vector<int64_t>> default_int64;  // kI64, exact
  std::optional<std::vector<std::string>> default_strings;  // kString
};
// kU8 features: shape {} gives uint8 [length]; shape {k} gives uint8 [k, length] and needs
// strings of equal length.

// A feature whose length varies. kSparse (tf.io.VarLenFeature): one example gives a sparse
// tensor of dense shape [n] (indices [n, 1]); a batch (parse_example, or batch() of parsed
// examples) gives indices [total, 2] of (example, position) and dense shape [batch, longest].
// The other modes give one example a dense [n]; a batch either ragged values plus
// `name/row_splits` (int64 [batch + 1]), or a dense [batch, longest] tensor padded with
// `padding_value` ("" for strings).
enum class VarLenMode { kSparse, kRagged, kPadded };
struct VarLenFeature {
  DType dtype = DType::kF32;  // kF32, kI64 or kString
  VarLenMode mode = VarLenMode::kSparse;
  double padding_value = 0.0;
};

// tf.io.SparseFeature (tensorflow/python/ops/parsing_config.py): a SparseTensor assembled
// from an Example's features: `value_key` holds the values, `index_key` one int64 feature per
// dimension holding each value's index in that dimension (as many as the values, each in
// [0, size[d])). One example gives dense shape `size`, a batch [batch, ...size]. Entries are
// sorted by index (row-major) unless `already_sorted` says the wire order is already so, as
// sparse_ops.sparse_merge does. Missing features give no entries.
struct SparseFeature {
  std::vector<std::string> index_key;  // one per dimension
  std::string value_key;
  DType dtype = DType::kF32;  // the values': kF32, kI64 or kString
  Shape size;                 // the dense shape, one entry per index_key
  bool already_sorted = false;
};

// tf.io.FixedLenSequenceFeature: a run of values of `shape` each, as many as the feature holds
// (its value count must be a multiple of shape's). One example gives [n, ...shape]; a batch
// [batch, longest n, ...shape] padded with the default (default_value, default_int64 for exact
// int64, default_string; otherwise 0 or ""). In an Example spec (parse_example and the parsers
// here) TF requires allow_missing = true, and a missing feature gives n = 0. In a
// SequenceExample's sequence features (sequence_example.h) each entry of the feature list is
// one element of `shape`; allow_missing lets the list be missing, and TF allows no default.
// Parsed one example at a time (example_dataset, example_parser), lengths differ: batch such
// elements with padded_batch (which pads with 0 or ""), or parse whole batches with
// parse_example to pad with the default.
struct FixedLenSequenceFeature {
  Shape shape;                // per element; {} for one value
  DType dtype = DType::kF32;  // kF32, kI64 or kString
  bool allow_missing = false;
  std::optional<double> default_value;
  std::optional<int64_t> default_int64;
  std::optional<std::string> default_string;
};

using FeatureSpec =
    std::variant<FixedLenFeature, VarLenFeature, SparseFeature, FixedLenSequenceFeature>;
using FeatureSpecs = std::map<std::string, FeatureSpec>;

// One serialised Example. `where` ("'train.tfrecord' record 17") prefixes error messages.
Features parse_single_example(std::string_view serialized, const FeatureSpecs& specs,
                              std::string_view where = "serialized example");
// A batch of serialised Examples: fixed features [batch, ...shape], variable ones as above
// (example_batch.cpp). Errors name the example's index in the batch.
Features parse_example(std::span<const std::string> serialized, const FeatureSpecs& specs);

// For ds.map: parses element.value (a TFRecord record), moving `label_key` (when not empty)
// from the features to the labels.
MapFn example_parser(FeatureSpecs specs, std::string label_key = "");

struct ExampleDatasetOptions {
  std::string label_key;  // feature moved to the labels; empty: none
  Compression compression = Compression::kNone;
};
// TFRecord files of Examples, read and parsed in one stage so that errors name the file and
// record. Equivalent to tfrecord_dataset(paths).map(example_parser(specs, label_key)).
Dataset example_dataset(std::vector<std::string> paths, FeatureSpecs specs,
                        ExampleDatasetOptions options = {});

// Builds an Example feature by feature; serialize() gives the wire bytes.
class ExampleBuilder {
 public:
  ExampleBuilder();
  ~ExampleBuilder();
  ExampleBuilder(ExampleBuilder&&) noexcept;
  ExampleBuilder& operator=(ExampleBuilder&&) noexcept;

  ExampleBuilder& add_floats(const std::string& name, std::span<const float> values);
  ExampleBuilder& add_int64s(const std::string& name, std::span<const int64_t> values);
  ExampleBuilder& add_bytes(const std::string& name, const std::vector<std::string>& values);
  // A feature present with no list set (which parsing treats as missing).
  ExampleBuilder& add_empty(const std::string& name);
  std::string serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An Example holding each tensor flattened: float32/float64 as float_list, integer and bool
// types as int64_list, strings as bytes_list, uint8 as a single bytes value.
std::string serialize_example(const Features& features);

}  // namespace est::data
