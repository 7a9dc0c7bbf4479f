// parse_example's direct path: each record of the batch parsed straight into the batch's
// tensors (fixed features into their [batch, ...shape] slot, sparse features' values appended),
// as TF's FastParseExample does, instead of one tensor per feature per example that batching
// then copies (which made parsing mostly malloc and free). Taken when every spec is a
// FixedLenFeature of float32, int64 or string, or a sparse VarLenFeature; the outputs and the
// errors are parse_example's.
#include <algorithm>
#include <cstring>

#include "data/example_parsing.h"

namespace est::data::detail {
namespace {

struct SparseParts {
  std::vector<int64_t> counts;  // per example
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

// Appends the feature's values to `parts` (none when missing), counting them for `example`.
void append_values(const pb::Feature* feature, DType dtype, SparseParts& parts) {
  int64_t n = 0;
  if (feature) {
    if (dtype == DType::kF32) {
      const auto& list = feature->float_list().value();
      parts.floats.insert(parts.floats.end(), list.begin(), list.end());
      n = list.size();
    } else if (dtype == DType::kI64) {
      const auto& list = feature->int64_list().value();
      parts.ints.insert(parts.ints.end(), list.begin(), list.end());
      n = list.size();
    } else {
      const auto& list = feature->bytes_list().value();
      parts.strings.insert(parts.strings.end(), list.begin(), list.end());
      n = list.size();
    }
  }
  parts.counts.push_back(n);
}

Tensor sparse_batch(SparseParts& parts, DType dtype) {
  const int64_t batch = static_cast<int64_t>(parts.counts.size());
  int64_t total = 0, longest = 0;
  for (int64_t n : parts.counts) {
    total += n;
    longest = std::max(longest, n);
  }
  Tensor indices = Tensor::empty({total, 2}, DType::kI64);
  int64_t* index = indices.data<int64_t>();
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < parts.counts[static_cast<size_t>(i)]; ++j) {
      *index++ = i;
      *index++ = j;
    }
  Tensor values;
  if (dtype == DType::kF32) {
    values = Tensor::from_vector(parts.floats);
  } else if (dtype == DType::kI64) {
    values = Tensor::from_vector(parts.ints);
  } else {
    values = Tensor::empty({total}, DType::kString);
    std::move(parts.strings.begin(), parts.strings.end(), values.data<std::string>());
  }
  return Tensor::sparse(indices, values.reshape({total}), {batch, longest});
}

// Copies a fixed feature's values (already checked) into slot `i` of `out`.
void copy_fixed(const pb::Feature& feature, DType dtype, int64_t i, int64_t per_example,
                Tensor& out) {
  if (dtype == DType::kF32) {
    std::memcpy(out.data<float>() + i * per_example, feature.float_list().value().data(),
                sizeof(float) * static_cast<size_t>(per_example));
  } else if (dtype == DType::kI64) {
    std::memcpy(out.data<int64_t>() + i * per_example, feature.int64_list().value().data(),
                sizeof(int64_t) * static_cast<size_t>(per_example));
  } else {
    std::string* dst = out.data<std::string>() + i * per_example;
    for (const std::string& value : feature.bytes_list().value()) *dst++ = value;
  }
}

}  // namespace

bool direct_parse_applies(const FeatureSpecs& specs) {
  for (const auto& [name, spec] : specs) {
    if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
      if (fixed->dtype == DType::kU8) return false;
    } else if (const auto* var = std::get_if<VarLenFeature>(&spec)) {
      if (var->mode != VarLenMode::kSparse) return false;
    } else {
      return false;
    }
  }
  return true;
}

Features parse_example_direct(std::span<const std::string> serialized, const FeatureSpecs& specs) {
  for (const auto& [name, spec] : specs) check_spec(name, spec);
  const int64_t batch = static_cast<int64_t>(serialized.size());
  Features out;
  std::vector<Tensor*> fixed_out;  // per spec, in map order; null for sparse ones
  std::vector<SparseParts> sparse(specs.size());
  for (const auto& [name, spec] : specs) {
    Tensor* slot = nullptr;
    if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
      Shape shape{batch};
      shape.insert(shape.end(), fixed->shape.begin(), fixed->shape.end());
      slot = &out.emplace(name, Tensor::empty(shape, fixed->dtype)).first->second;
    }
    fixed_out.push_back(slot);
  }
  for (int64_t i = 0; i < batch; ++i) {
    const std::string text = "serialized example " + std::to_string(i);
    const Where where{.text = text};
    const pb::Example& example = parse_example_proto(serialized[static_cast<size_t>(i)], where);
    size_t s = 0;
    for (const auto& [name, spec] : specs) {
      const pb::Feature* found = find_feature(example.features(), name);
      if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
        const int64_t per_example = ops::num_elements(fixed->shape);
        Tensor& dst = *fixed_out[s];
        if (!found) {
          const Tensor value = missing_fixed_feature(*fixed, name, where);
          copy_elements(element_pointer(dst) + static_cast<size_t>(i) * value.nbytes(),
                        element_pointer(value), value.nbytes(), fixed->dtype);
        } else {
          if (!kind_matches(*found, fixed->dtype))
            throw wrong_kind(where, "feature '" + name + "'", *found, fixed->dtype);
          const int64_t count = value_count(*found, fixed->dtype);
          if (count != per_example)
            throw InvalidArgumentError(where.str() + ": feature '" + name + "' has " +
                                       std::to_string(count) + " values; the spec's shape " +
                                       ops::shape_str(fixed->shape) + " needs " +
                                       std::to_string(per_example));
          copy_fixed(*found, fixed->dtype, i, per_example, dst);
        }
      } else {
        const DType dtype = std::get<VarLenFeature>(spec).dtype;
        if (found && !kind_matches(*found, dtype))
          throw wrong_kind(where, "feature '" + name + "'", *found, dtype);
        append_values(found, dtype, sparse[s]);
      }
      ++s;
    }
  }
  size_t s = 0;
  for (const auto& [name, spec] : specs) {
    if (const auto* var = std::get_if<VarLenFeature>(&spec))
      out.emplace(name, sparse_batch(sparse[s], var->dtype));
    ++s;
  }
  return out;
}

}  // namespace est::data::detail
