// tf.data.experimental.cardinality (tensorflow/python/data/experimental/ops/cardinality.py and
// the kernels' CardinalityInternal): how many elements a pipeline yields, when that is known
// without iterating it. Each stage answers for itself (DatasetNode::cardinality): a source its
// size (from_tensor_slices loads its rows, which the iterators then share), one-to-one stages
// (map, shuffle, prefetch, cache, with_options) their input's, batch the rounded quotient, take,
// skip, shard and repeat as TensorFlow computes them; filter, interleave, generators and file
// readers are unknown. Internal for now (keras's fit counts a finite dataset with it).
#pragma once

#include <cstdint>

namespace est::data {

class Dataset;

inline constexpr int64_t kInfiniteCardinality = -1;  // tf.data.INFINITE_CARDINALITY
inline constexpr int64_t kUnknownCardinality = -2;   // tf.data.UNKNOWN_CARDINALITY

int64_t cardinality(const Dataset& dataset);

}  // namespace est::data
