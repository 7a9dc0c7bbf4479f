// parse_sequence_example: a batch of serialised SequenceExamples, each parsed as one, then
// combined as tf.io.parse_sequence_example combines them (tensorflow/python/ops/parsing_ops.py
// and FastParseSequenceExample in example_proto_fast_parsing.cc): context features as
// parse_example combines them, FixedLenSequenceFeatures padded to the batch's longest list with
// 0 or "" plus their lengths, VarLenFeatures as one sparse tensor [batch, longest, most].
#include <algorithm>

#include "data/example_parsing.h"

namespace est::data {

ParsedSequenceExamples parse_sequence_example(std::span<const std::string> serialized,
                                              const FeatureSpecs& context_features,
                                              const FeatureSpecs& sequence_features) {
  detail::check_sequence_example_specs(context_features, sequence_features);
  const int64_t batch = static_cast<int64_t>(serialized.size());
  std::vector<Features> contexts, sequences;
  for (int64_t i = 0; i < batch; ++i) {
    const std::string where = "serialized sequence example " + std::to_string(i);
    ParsedSequenceExample parsed =
        detail::parse_sequence_record(serialized[static_cast<size_t>(i)], context_features,
                                      sequence_features, detail::Where{.text = where});
    contexts.push_back(std::move(parsed.context));
    sequences.push_back(std::move(parsed.sequence));
  }
  ParsedSequenceExamples out;
  out.context = detail::batch_parsed(contexts, context_features);
  for (const auto& [name, spec] : sequence_features) {
    std::vector<const Tensor*> parts;
    for (const Features& f : sequences) parts.push_back(&f.at(name));
    if (const auto* fixed = std::get_if<FixedLenSequenceFeature>(&spec)) {
      Tensor lengths = Tensor::empty({batch}, DType::kI64);
      int64_t longest = 0;
      for (int64_t i = 0; i < batch; ++i) {
        lengths.data<int64_t>()[i] = parts[static_cast<size_t>(i)]->dim(0);
        longest = std::max(longest, lengths.data<int64_t>()[i]);
      }
      Shape shape{batch, longest};
      shape.insert(shape.end(), fixed->shape.begin(), fixed->shape.end());
      Tensor padded = detail::padding_tensor(shape, *fixed);
      detail::copy_rows_padded(parts, padded);
      out.sequence.emplace(name, std::move(padded));
      out.lengths.emplace(name, std::move(lengths));
    } else {
      out.sequence.emplace(name,
                           detail::batch_sparse(parts, std::get<VarLenFeature>(spec).dtype, 2));
    }
  }
  return out;
}

}  // namespace est::data
