// Internals shared by the tf.train.Example parsers (example.cpp, example_features.cpp,
// example_batch.cpp) and the SequenceExample parsers (sequence_example*.cpp): reading one
// Feature's list, parsing one spec of a Features message, and combining parsed examples into a
// batch. Not part of the public API (it exposes the generated Protobuf classes).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "data/example.h"
#include "data/sequence_example.h"
#include "example.pb.h"

namespace est::data::detail {

namespace pb = est::data::proto;

// Where a record came from, for messages; only turned into text when something is wrong, so
// that parsing a record does not build a string.
struct Where {
  std::string_view text;              // used when path is null
  const std::string* path = nullptr;  // a file ...
  int64_t record = 0;                 // ... and the record's index in it
  std::string str() const {
    return path ? "'" + *path + "' record " + std::to_string(record) : std::string(text);
  }
};

// The list a dtype is read from, and the list a feature holds, by name.
std::string expected_list(DType dtype);
std::string found_list(const pb::Feature& feature);
// Whether the feature's list is the dtype's (false when no list is set).
bool kind_matches(const pb::Feature& feature, DType dtype);
// The number of values in the feature's list of the dtype's kind.
int64_t value_count(const pb::Feature& feature, DType dtype);
// The values in wire order as a tensor of `shape` (which holds exactly value_count() values).
Tensor list_values(const pb::Feature& feature, DType dtype, const Shape& shape);
// A feature with no list set counts as missing (example_proto_fast_parsing.cc).
const pb::Feature* find_feature(const pb::Features& features, const std::string& name);
// An InvalidArgumentError for a feature holding another list than the spec's dtype.
InvalidArgumentError wrong_kind(const Where& where, const std::string& what,
                                const pb::Feature& feature, DType dtype);

// Checks a spec of an Example (and of a SequenceExample's context): dtypes, shapes, defaults.
void check_spec(const std::string& name, const FeatureSpec& spec);
// The tensor of one spec for one Example (example_features.cpp holds the SparseFeature and
// FixedLenSequenceFeature parts).
Tensor parse_feature(const pb::Features& features, const std::string& name, const FeatureSpec& spec,
                     const Where& where);
void check_sparse_spec(const std::string& name, const SparseFeature& spec);
void check_sequence_spec(const std::string& name, const FixedLenSequenceFeature& spec);
Tensor parse_sparse_feature(const pb::Features& features, const std::string& name,
                            const SparseFeature& spec, const Where& where);
Tensor parse_sequence_feature(const pb::Features& features, const std::string& name,
                              const FixedLenSequenceFeature& spec, const Where& where);

// A dense tensor of `shape` filled with a FixedLenSequenceFeature's padding value (its default,
// else 0 or "").
Tensor padding_tensor(const Shape& shape, const FixedLenSequenceFeature& spec);
// Stacks per-example tensors [n_i, ...inner] into [batch, max n_i, ...inner] over `padded`
// (which holds the padding already); rows keep their order.
void copy_rows_padded(const std::vector<const Tensor*>& parts, Tensor& padded);
// Per-example sparse tensors of equal rank combined as a batch: each entry's indices get the
// example's index in front, the dense shape is [batch, largest of each dimension] (or
// `dense_shape` after the batch dimension when given, for SparseFeature).
Tensor batch_sparse(const std::vector<const Tensor*>& parts, DType dtype, size_t rank,
                    const Shape* dense_shape = nullptr);

// One Example parsed into this thread's arena (valid until the thread's next call), and a
// missing FixedLenFeature's default tensor (or the error naming it).
const pb::Example& parse_example_proto(std::string_view serialized, const Where& where);
Tensor missing_fixed_feature(const FixedLenFeature& spec, const std::string& name,
                             const Where& where);

// parse_example's direct path (example_batch_direct.cpp): whether it handles every spec, and
// the batch parsed straight into its tensors.
bool direct_parse_applies(const FeatureSpecs& specs);
Features parse_example_direct(std::span<const std::string> serialized, const FeatureSpecs& specs);

// Parsed examples (each a Features of `specs`) combined as tf.io.parse_example combines them
// (example_batch.cpp).
Features batch_parsed(const std::vector<Features>& parsed, const FeatureSpecs& specs);

// SequenceExample specs checked once (sequence_example.cpp), and one record parsed with
// checked specs.
void check_sequence_example_specs(const FeatureSpecs& context_features,
                                  const FeatureSpecs& sequence_features);
ParsedSequenceExample parse_sequence_record(std::string_view serialized,
                                            const FeatureSpecs& context_features,
                                            const FeatureSpecs& sequence_features,
                                            const Where& where);

}  // namespace est::data::detail
