// parse_example: a batch of serialised Examples, each parsed by parse_single_example, then
// combined per feature as tf.io.parse_example combines them (tensorflow/python/ops/parsing_ops.py,
// parsing_config.py): fixed features stacked, sparse (VarLenFeature) ones as one SparseTensor
// [batch, longest], SparseFeature as [batch, ...size], FixedLenSequenceFeature padded to the
// batch's longest with its default, ragged and padded as example.h says.
#include <algorithm>

#include "data/example_parsing.h"

namespace est::data {
namespace {

// Fixed features stacked to [batch, ...shape]; padded ones [batch, longest] filled first.
Tensor stack_fixed(const std::vector<Features>& parsed, const std::string& name,
                   const FeatureSpec& spec) {
  const auto* var = std::get_if<VarLenFeature>(&spec);
  const int64_t batch = static_cast<int64_t>(parsed.size());
  Shape inner;
  if (var) {
    int64_t longest = 0;
    for (const Features& f : parsed) longest = std::max(longest, f.at(name).numel());
    inner = {longest};
  } else {
    inner = parsed.empty() ? std::get<FixedLenFeature>(spec).shape : parsed[0].at(name).shape();
    for (size_t i = 1; i < parsed.size(); ++i)
      if (parsed[i].at(name).shape() != inner)
        throw InvalidArgumentError(
            "parse_example: bytes feature '" + name + "' of example " + std::to_string(i) +
            " has shape " + ops::shape_str(parsed[i].at(name).shape()) + " but example 0's has " +
            ops::shape_str(inner) + "; byte strings batched together need equal lengths");
  }
  Shape shape{batch};
  shape.insert(shape.end(), inner.begin(), inner.end());
  const DType dtype = var ? var->dtype : std::get<FixedLenFeature>(spec).dtype;
  Tensor stacked = dtype == DType::kString
                       ? Tensor::empty(shape, dtype)  // padded with ""
                       : Tensor::full(shape, var ? var->padding_value : 0.0, dtype);
  const size_t slot = static_cast<size_t>(ops::num_elements(inner)) * ops::dtype_size(dtype);
  char* dst = element_pointer(stacked);
  for (int64_t i = 0; i < batch; ++i) {
    const Tensor& part = parsed[static_cast<size_t>(i)].at(name);
    copy_elements(dst + static_cast<size_t>(i) * slot, element_pointer(part), part.nbytes(), dtype);
  }
  return stacked;
}

// The concatenated values of a variable-length feature, and where each example's start.
std::pair<Tensor, std::vector<int64_t>> concat_values(const std::vector<Features>& parsed,
                                                      const std::string& name, DType dtype,
                                                      bool sparse) {
  std::vector<int64_t> starts{0};
  for (const Features& f : parsed) starts.push_back(starts.back() + f.at(name).shape()[0]);
  Tensor values = Tensor::empty({starts.back()}, dtype);
  char* dst = element_pointer(values);
  for (const Features& f : parsed) {
    const Tensor& part = sparse ? f.at(name).values() : f.at(name);
    copy_elements(dst, element_pointer(part), part.nbytes(), dtype);
    dst += part.nbytes();
  }
  return {values, starts};
}

// [batch, longest, ...shape] padded with the spec's default.
Tensor stack_sequence(const std::vector<Features>& parsed, const std::string& name,
                      const FixedLenSequenceFeature& spec) {
  std::vector<const Tensor*> parts;
  int64_t longest = 0;
  for (const Features& f : parsed) {
    parts.push_back(&f.at(name));
    longest = std::max(longest, parts.back()->dim(0));
  }
  Shape shape{static_cast<int64_t>(parsed.size()), longest};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  Tensor out = detail::padding_tensor(shape, spec);
  detail::copy_rows_padded(parts, out);
  return out;
}

}  // namespace

Features parse_example(std::span<const std::string> serialized, const FeatureSpecs& specs) {
  if (detail::direct_parse_applies(specs)) return detail::parse_example_direct(serialized, specs);
  std::vector<Features> parsed;
  parsed.reserve(serialized.size());
  for (size_t i = 0; i < serialized.size(); ++i)
    parsed.push_back(
        parse_single_example(serialized[i], specs, "serialized example " + std::to_string(i)));
  return detail::batch_parsed(parsed, specs);
}

Features detail::batch_parsed(const std::vector<Features>& parsed, const FeatureSpecs& specs) {
  const int64_t batch = static_cast<int64_t>(parsed.size());
  Features out;
  for (const auto& [name, spec] : specs) {
    if (const auto* sequence = std::get_if<FixedLenSequenceFeature>(&spec)) {
      out.emplace(name, stack_sequence(parsed, name, *sequence));
      continue;
    }
    if (const auto* sparse = std::get_if<SparseFeature>(&spec)) {
      std::vector<const Tensor*> parts;
      for (const Features& f : parsed) parts.push_back(&f.at(name));
      out.emplace(name,
                  batch_sparse(parts, sparse->dtype, sparse->index_key.size(), &sparse->size));
      continue;
    }
    const auto* var = std::get_if<VarLenFeature>(&spec);
    if (!var || var->mode == VarLenMode::kPadded) {
      out.emplace(name, stack_fixed(parsed, name, spec));
      continue;
    }
    const bool sparse = var->mode == VarLenMode::kSparse;
    auto [values, starts] = concat_values(parsed, name, var->dtype, sparse);
    if (sparse) {
      Tensor indices = Tensor::empty({starts.back(), 2}, DType::kI64);
      int64_t* index = indices.data<int64_t>();
      int64_t longest = 0;
      for (int64_t i = 0; i < batch; ++i) {
        const int64_t count = starts[static_cast<size_t>(i) + 1] - starts[static_cast<size_t>(i)];
        longest = std::max(longest, count);
        for (int64_t j = 0; j < count; ++j) {
          *index++ = i;
          *index++ = j;
        }
      }
      out.emplace(name, Tensor::sparse(indices, values, {batch, longest}));
    } else {
      out.emplace(name, values);
      out.emplace(name + "/row_splits", Tensor::from_vector(starts));
    }
  }
  return out;
}

}  // namespace est::data
