// FarmHash fingerprints, FingerprintCat64 and the hashed sparse cross (see hashing.h).
#include "feature_column/hashing.h"

#include <farmhash.h>

#include <limits>

#include <fmt/format.h>

namespace est::feature_column {
namespace {

// One input of a cross, as per-example lists of value hashes.
struct CrossInput {
  std::vector<std::vector<uint64_t>> rows;
};

uint64_t value_hash_at(const Tensor& values, int64_t i) {
  switch (values.dtype()) {
    case DType::kString:
      return fingerprint64(values.data<std::string>()[i]);
    case DType::kI64:
      return static_cast<uint64_t>(values.data<int64_t>()[i]);
    case DType::kI32:
      return static_cast<uint64_t>(static_cast<int64_t>(values.data<int32_t>()[i]));
    default:
      throw InvalidArgumentError(
          "sparse_cross_hashed: inputs must be string or integer tensors, "
          "got " +
          std::string(ops::dtype_name(values.dtype())));
  }
}

CrossInput cross_input(const Tensor& input, size_t position) {
  if (!input.defined() || input.rank() != 2)
    throw InvalidArgumentError(fmt::format(
        "sparse_cross_hashed: input {} must be a rank-2 [batch, k] tensor, dense or sparse, got "
        "{}",
        position, input.defined() ? ops::shape_str(input.shape()) : "an undefined tensor"));
  CrossInput out;
  out.rows.resize(static_cast<size_t>(input.dim(0)));
  if (input.is_sparse()) {
    const Tensor indices = input.indices().to(ops::Device::cpu());
    const Tensor values = input.values().to(ops::Device::cpu());
    const int64_t* index = indices.data<int64_t>();
    for (int64_t i = 0; i < values.numel(); ++i)
      out.rows[static_cast<size_t>(index[2 * i])].push_back(value_hash_at(values, i));
  } else {
    const Tensor values = input.to(ops::Device::cpu()).reshape({-1});
    const int64_t k = input.dim(1);
    for (int64_t i = 0; i < values.numel(); ++i)
      out.rows[static_cast<size_t>(i / k)].push_back(value_hash_at(values, i));
  }
  return out;
}

}  // namespace

uint64_t fingerprint64(std::string_view bytes) {
  return util::Fingerprint64(bytes.data(), bytes.size());
}

// fingerprint.h: mixes the second fingerprint into the first with MurmurHash's multiplier.
uint64_t fingerprint_cat64(uint64_t first, uint64_t second) {
  constexpr uint64_t kMul = 0xc6a4a7935bd1e995ull;
  auto shift_mix = [](uint64_t v) { return v ^ (v >> 47); };
  uint64_t result = first ^ kMul;
  result ^= shift_mix(second * kMul) * kMul;
  result *= kMul;
  result = shift_mix(result) * kMul;
  return shift_mix(result);
}

Tensor string_to_hash_bucket_fast(const Tensor& strings, int64_t num_buckets) {
  if (num_buckets < 1)
    throw InvalidArgumentError("string_to_hash_bucket_fast: num_buckets must be >= 1, got " +
                               std::to_string(num_buckets));
  if (strings.is_sparse())
    return Tensor::sparse(strings.indices(),
                          string_to_hash_bucket_fast(strings.values(), num_buckets),
                          strings.shape());
  if (strings.dtype() != DType::kString)
    throw InvalidArgumentError("string_to_hash_bucket_fast: expected a string tensor, got " +
                               std::string(ops::dtype_name(strings.dtype())));
  Tensor out = Tensor::empty(strings.shape(), DType::kI64);
  const std::string* in = strings.data<std::string>();
  int64_t* ids = out.data<int64_t>();
  for (int64_t i = 0; i < strings.numel(); ++i)
    ids[i] = static_cast<int64_t>(fingerprint64(in[i]) % static_cast<uint64_t>(num_buckets));
  return out;
}

Tensor sparse_cross_hashed(const std::vector<Tensor>& inputs, int64_t num_buckets,
                           uint64_t hash_key) {
  if (inputs.empty()) throw InvalidArgumentError("sparse_cross_hashed: no inputs");
  if (num_buckets < 0) throw InvalidArgumentError("sparse_cross_hashed: num_buckets must be >= 0");
  std::vector<CrossInput> columns;
  for (size_t i = 0; i < inputs.size(); ++i) {
    columns.push_back(cross_input(inputs[i], i));
    if (columns.back().rows.size() != columns[0].rows.size())
      throw InvalidArgumentError(
          fmt::format("sparse_cross_hashed: input {} has batch size {} but input 0 has {}", i,
                      columns.back().rows.size(), columns[0].rows.size()));
  }
  const uint64_t modulus =
      num_buckets > 0 ? static_cast<uint64_t>(num_buckets) : static_cast<uint64_t>(INT64_MAX);
  std::vector<int64_t> indices, values;
  int64_t widest = 0;
  const size_t batch = columns[0].rows.size();
  std::vector<size_t> choice(columns.size());
  for (size_t b = 0; b < batch; ++b) {
    int64_t count = 1;
    for (const CrossInput& column : columns) count *= static_cast<int64_t>(column.rows[b].size());
    widest = std::max(widest, count);
    std::fill(choice.begin(), choice.end(), 0);
    for (int64_t n = 0; n < count; ++n) {
      uint64_t hashed = hash_key;
      for (size_t c = 0; c < columns.size(); ++c)
        hashed = fingerprint_cat64(hashed, columns[c].rows[b][choice[c]]);
      indices.push_back(static_cast<int64_t>(b));
      indices.push_back(n);
      values.push_back(static_cast<int64_t>(hashed % modulus));
      for (size_t c = columns.size(); c-- > 0;) {  // the last input varies fastest
        if (++choice[c] < columns[c].rows[b].size()) break;
        choice[c] = 0;
      }
    }
  }
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::sparse(Tensor::from_vector(indices, {n, 2}), Tensor::from_vector(values, {n}),
                        {static_cast<int64_t>(batch), widest});
}

}  // namespace est::feature_column
