// TensorFlow's string hashing for feature columns, bit for bit:
//   - fingerprint64: FarmHash's Fingerprint64 (Google's library as Debian packages it,
//     libfarmhash-dev), what tensorflow/core/platform/fingerprint.h calls Fingerprint64;
//   - fingerprint_cat64: FingerprintCat64 from the same header, which chains fingerprints;
//   - string_to_hash_bucket_fast (tf.strings.to_hash_bucket_fast): Fingerprint64 % buckets;
//   - sparse_cross_hashed (tf.sparse.cross_hashed, tensorflow/core/kernels/sparse_cross_op.cc):
//     per example, every combination of one value from each input (the last input varying
//     fastest), hashed as hash_key -> FingerprintCat64(h, value hash) over the inputs in order,
//     where a string's hash is its Fingerprint64 and an int64's is the value itself; then
//     modulo num_buckets, or modulo INT64_MAX when num_buckets is 0.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/tensor.h"

namespace est::feature_column {

// tf.sparse.cross_hashed's default hash_key (sparse_ops._DEFAULT_HASH_KEY = 0xDECAFCAFFE).
inline constexpr uint64_t kDefaultHashKey = 0xDECAFCAFFEull;

uint64_t fingerprint64(std::string_view bytes);
uint64_t fingerprint_cat64(uint64_t first, uint64_t second);

// int64 bucket ids of a string tensor (dense or sparse; same shape / indices).
Tensor string_to_hash_bucket_fast(const Tensor& strings, int64_t num_buckets);

// `inputs`: sparse or dense [batch, k] tensors of strings or int64 (int32 too), one per crossed
// feature. The result is a sparse int64 [batch, largest cross count] tensor.
Tensor sparse_cross_hashed(const std::vector<Tensor>& inputs, int64_t num_buckets = 0,
                           uint64_t hash_key = kDefaultHashKey);

}  // namespace est::feature_column
