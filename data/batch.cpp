// batch, padded_batch and ragged_batch: gather elements, check that they share a structure, and
// copy each component into one new tensor with memcpy (no per-value work on the dense path;
// strings are assigned element by element, see copy_elements). Sparse components are batched as
// tf.data batches SparseTensors: the element's index goes in front of each entry's indices and
// the dense shape is [batch, largest of each dimension].
#include <algorithm>
#include <cstring>
#include <set>

#include "data/stages.h"

namespace est::data {
namespace {

using Kind = BatchConfig::Kind;

std::string stage_name(Kind kind) {
  switch (kind) {
    case Kind::kDense:
      return "batch";
    case Kind::kPadded:
      return "padded_batch";
    case Kind::kRagged:
      return "ragged_batch";
  }
  return "batch";
}

void check_same_structure(const std::vector<Element>& elements, Kind kind) {
  const Element& first = elements[0];
  for (size_t i = 1; i < elements.size(); ++i) {
    const Element& other = elements[i];
    bool same = other.features.size() == first.features.size() &&
                other.labels.defined() == first.labels.defined() &&
                other.value.defined() == first.value.defined() &&
                std::equal(first.features.begin(), first.features.end(), other.features.begin(),
                           [](const auto& a, const auto& b) { return a.first == b.first; });
    if (!same)
      throw InvalidArgumentError(stage_name(kind) + ": element " + std::to_string(i) +
                                 " of the batch has structure {" + structure_str(other) +
                                 "} but element 0 has {" + structure_str(first) +
                                 "}; every element must have the same features and labels");
  }
}

void check_dtype(const std::vector<const Tensor*>& parts, std::string_view name, Kind kind) {
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i]->dtype() != parts[0]->dtype())
      throw InvalidArgumentError(
          stage_name(kind) + ": component '" + std::string(name) + "' of element " +
          std::to_string(i) + " is " + std::string(ops::dtype_name(parts[i]->dtype())) +
          " but element 0's is " + std::string(ops::dtype_name(parts[0]->dtype())));
}

Tensor stack_dense(const std::vector<const Tensor*>& parts, std::string_view name) {
  const Shape& shape = parts[0]->shape();
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i]->shape() != shape)
      throw InvalidArgumentError(
          "batch: component '" + std::string(name) + "' of element " + std::to_string(i) +
          " has shape " + ops::shape_str(parts[i]->shape()) + " but element 0's has shape " +
          ops::shape_str(shape) + "; use padded_batch or ragged_batch for variable shapes");
  Shape out_shape{static_cast<int64_t>(parts.size())};
  out_shape.insert(out_shape.end(), shape.begin(), shape.end());
  Tensor out = Tensor::empty(out_shape, parts[0]->dtype());
  size_t bytes = parts[0]->nbytes();
  char* dst = element_pointer(out);
  for (const Tensor* part : parts) {
    copy_elements(dst, element_pointer(*part), bytes, out.dtype());
    dst += bytes;
  }
  return out;
}

// SparseTensors of equal rank: entries concatenated with the element's index prepended.
Tensor stack_sparse(const std::vector<const Tensor*>& parts, std::string_view name, Kind kind) {
  if (kind != Kind::kDense)
    throw InvalidArgumentError(stage_name(kind) + ": component '" + std::string(name) +
                               "' is a sparse tensor, which only batch() combines (as tf.data "
                               "does); convert it with sparse::to_dense first");
  const size_t rank = parts[0]->shape().size();
  Shape dense{static_cast<int64_t>(parts.size())};
  dense.resize(rank + 1, 0);
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i]->is_sparse() || parts[i]->shape().size() != rank)
      throw InvalidArgumentError(
          "batch: component '" + std::string(name) + "' of element " + std::to_string(i) + " is " +
          (parts[i]->is_sparse() ? "sparse of rank " + std::to_string(parts[i]->rank())
                                 : std::string("dense")) +
          " but element 0's is sparse of rank " + std::to_string(rank));
    for (size_t a = 0; a < rank; ++a) dense[a + 1] = std::max(dense[a + 1], parts[i]->shape()[a]);
    total += parts[i]->indices().dim(0);
  }
  Tensor indices = Tensor::empty({total, static_cast<int64_t>(rank) + 1}, DType::kI64);
  Tensor values = Tensor::empty({total}, parts[0]->dtype());
  int64_t* index = indices.data<int64_t>();
  char* dst = element_pointer(values);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor part_indices = parts[i]->indices().to(ops::Device::cpu());
    const Tensor part_values = parts[i]->values().to(ops::Device::cpu());
    const int64_t* in = part_indices.data<int64_t>();
    for (int64_t e = 0; e < part_indices.dim(0); ++e) {
      *index++ = static_cast<int64_t>(i);
      for (size_t a = 0; a < rank; ++a) *index++ = in[static_cast<size_t>(e) * rank + a];
    }
    copy_elements(dst, element_pointer(part_values), part_values.nbytes(), values.dtype());
    dst += part_values.nbytes();
  }
  return Tensor::sparse(indices, values, dense);
}

// Copies a row-major block of shape `src_shape` into the top-left corner of `dst_shape`.
void copy_padded(const char* src, const Shape& src_shape, char* dst, const Shape& dst_shape,
                 DType dtype, size_t axis) {
  const size_t element_size = ops::dtype_size(dtype);
  if (axis + 1 >= src_shape.size()) {
    size_t count = src_shape.empty() ? 1 : static_cast<size_t>(src_shape[axis]);
    copy_elements(dst, src, count * element_size, dtype);
    return;
  }
  size_t src_stride = element_size, dst_stride = element_size;
  for (size_t a = axis + 1; a < src_shape.size(); ++a) {
    src_stride *= static_cast<size_t>(src_shape[a]);
    dst_stride *= static_cast<size_t>(dst_shape[a]);
  }
  for (int64_t i = 0; i < src_shape[axis]; ++i)
    copy_padded(src + i * src_stride, src_shape, dst + i * dst_stride, dst_shape, dtype, axis + 1);
}

Tensor stack_padded(const std::vector<const Tensor*>& parts, std::string_view name,
                    const BatchConfig& config) {
  size_t rank = parts[0]->shape().size();
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i]->shape().size() != rank)
      throw InvalidArgumentError("padded_batch: component '" + std::string(name) + "' of element " +
                                 std::to_string(i) + " has rank " +
                                 std::to_string(parts[i]->rank()) + " but element 0's has rank " +
                                 std::to_string(rank) + "; padding needs equal ranks");
  Shape target(rank, 0);
  for (const Tensor* part : parts)
    for (size_t a = 0; a < rank; ++a) target[a] = std::max(target[a], part->shape()[a]);
  auto given = config.padded_shapes.find(std::string(name));
  if (given != config.padded_shapes.end()) {
    const Shape& padded = given->second;
    if (padded.size() != rank)
      throw InvalidArgumentError("padded_batch: padded shape " + ops::shape_str(padded) + " for '" +
                                 std::string(name) + "' has rank " + std::to_string(padded.size()) +
                                 " but the component has rank " + std::to_string(rank));
    for (size_t a = 0; a < rank; ++a) {
      if (padded[a] < 0) continue;
      if (padded[a] < target[a])
        throw InvalidArgumentError("padded_batch: component '" + std::string(name) + "' has size " +
                                   std::to_string(target[a]) + " in dimension " +
                                   std::to_string(a) + ", more than its padded shape " +
                                   ops::shape_str(padded) + " allows");
      target[a] = padded[a];
    }
  }
  auto value = config.padding_values.find(std::string(name));
  Shape out_shape{static_cast<int64_t>(parts.size())};
  out_shape.insert(out_shape.end(), target.begin(), target.end());
  // Strings pad with "" as in tf.data (padding_values holds numbers only).
  Tensor out =
      parts[0]->dtype() == DType::kString
          ? Tensor::empty(out_shape, DType::kString)
          : Tensor::full(out_shape, value == config.padding_values.end() ? 0.0 : value->second,
                         parts[0]->dtype());
  size_t element_size = ops::dtype_size(out.dtype());
  size_t slot_bytes = static_cast<size_t>(ops::num_elements(target)) * element_size;
  char* dst = element_pointer(out);
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i]->numel() > 0)
      copy_padded(element_pointer(*parts[i]), parts[i]->shape(), dst + i * slot_bytes, target,
                  out.dtype(), 0);
  return out;
}

// Values concatenated along the first dimension, and int64 [n + 1] row splits.
std::pair<Tensor, Tensor> stack_ragged(const std::vector<const Tensor*>& parts,
                                       std::string_view name) {
  Shape inner;
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Shape& shape = parts[i]->shape();
    if (shape.empty())
      throw InvalidArgumentError("ragged_batch: feature '" + std::string(name) + "' of element " +
                                 std::to_string(i) + " is a scalar; ragged rows need rank >= 1");
    Shape rest(shape.begin() + 1, shape.end());
    if (i == 0) inner = rest;
    if (rest != inner)
      throw InvalidArgumentError("ragged_batch: feature '" + std::string(name) + "' of element " +
                                 std::to_string(i) + " has shape " + ops::shape_str(shape) +
                                 "; only the first dimension may vary between elements");
    total += shape[0];
  }
  Shape values_shape{total};
  values_shape.insert(values_shape.end(), inner.begin(), inner.end());
  Tensor values = Tensor::empty(values_shape, parts[0]->dtype());
  Tensor splits = Tensor::empty({static_cast<int64_t>(parts.size()) + 1}, DType::kI64);
  int64_t* split = splits.data<int64_t>();
  char* dst = element_pointer(values);
  split[0] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    size_t bytes = parts[i]->nbytes();
    copy_elements(dst, element_pointer(*parts[i]), bytes, values.dtype());
    dst += bytes;
    split[i + 1] = split[i] + parts[i]->shape()[0];
  }
  return {values, splits};
}

Tensor stack(const std::vector<const Tensor*>& parts, std::string_view name,
             const BatchConfig& config) {
  check_dtype(parts, name, config.kind);
  if (parts[0]->is_sparse()) return stack_sparse(parts, name, config.kind);
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i]->is_sparse())
      throw InvalidArgumentError(stage_name(config.kind) + ": component '" + std::string(name) +
                                 "' of element " + std::to_string(i) +
                                 " is sparse but element 0's is dense");
  if (config.kind == Kind::kPadded) return stack_padded(parts, name, config);
  return stack_dense(parts, name);
}

// Elements drawn from a large shuffle buffer arrive cold, each tensor behind a chain of
// pointers (handle -> impl -> storage -> bytes). Walked element by element, the batch takes
// those misses one after another; walked a level at a time across the whole batch, the misses
// of one level overlap: prefetch every impl, then read them and the storages (independent
// loads, in flight together) to prefetch shapes and first bytes. Nothing is checked here.
void warm_up(const std::vector<Element>& elements) {
  auto each_tensor = [&](auto&& fn) {
    for (const Element& element : elements) {
      for (const auto& [name, tensor] : element.features) fn(tensor);
      fn(element.labels);
      fn(element.value);
    }
  };
  each_tensor([](const Tensor& t) {
    if (t.defined()) __builtin_prefetch(t.impl());
  });
  each_tensor([](const Tensor& t) {
    if (!t.defined() || t.is_sparse()) return;
    __builtin_prefetch(t.shape().data());
    __builtin_prefetch(element_pointer(t));
  });
}

Element batch_elements(const std::vector<Element>& elements, const BatchConfig& config,
                       const std::set<std::string>& ragged) {
  warm_up(elements);
  check_same_structure(elements, config.kind);
  const Element& first = elements[0];
  for (const std::string& name : ragged)
    if (!first.features.count(name))
      throw InvalidArgumentError("ragged_batch: the elements have no feature '" + name +
                                 "' (they have " + structure_str(first) + ")");
  Element out;
  std::vector<const Tensor*> parts(elements.size());
  for (const auto& [name, tensor] : first.features) {
    for (size_t i = 0; i < elements.size(); ++i)
      parts[i] = &elements[i].features.find(name)->second;
    if (ragged.count(name)) {
      check_dtype(parts, name, config.kind);
      for (const Tensor* part : parts)
        if (part->is_sparse())
          throw InvalidArgumentError("ragged_batch: feature '" + name +
                                     "' is sparse; batch() combines sparse tensors");
      auto [values, splits] = stack_ragged(parts, name);
      out.features[name] = values;
      out.features[name + "/row_splits"] = splits;
    } else {
      out.features[name] = stack(parts, name, config);
    }
  }
  if (first.labels.defined()) {
    for (size_t i = 0; i < elements.size(); ++i) parts[i] = &elements[i].labels;
    out.labels = stack(parts, kLabelsName, config);
  }
  if (first.value.defined()) {
    for (size_t i = 0; i < elements.size(); ++i) parts[i] = &elements[i].value;
    out.value = stack(parts, kValueName, config);
  }
  return out;
}

class BatchIterator final : public IteratorBase {
 public:
  BatchIterator(std::unique_ptr<IteratorBase> input, const BatchConfig& config)
      : input_(std::move(input)),
        config_(config),
        ragged_(config.ragged_features.begin(), config.ragged_features.end()) {
    elements_.reserve(static_cast<size_t>(std::min<int64_t>(config.batch_size, 1 << 16)));
  }

  std::optional<Element> next() override {
    if (config_.kind == Kind::kDense)
      if (const RowStore* store = input_->row_store()) return gather(*store);
    elements_.clear();
    while (static_cast<int64_t>(elements_.size()) < config_.batch_size) {
      std::optional<Element> element = input_->next();
      if (!element) break;
      elements_.push_back(std::move(*element));
    }
    if (elements_.empty()) return std::nullopt;
    if (config_.drop_remainder && static_cast<int64_t>(elements_.size()) < config_.batch_size)
      return std::nullopt;
    Element out = batch_elements(elements_, config_, ragged_);
    elements_.clear();
    return out;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage(stage_name(config_.kind));
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage(stage_name(config_.kind));
    input_->restore(reader);
  }

 private:
  // The input's elements are rows of a column store (a filled cache, tensor slices, possibly
  // shuffled): copy each row straight from its column into the batch, no element in between.
  std::optional<Element> gather(const RowStore& store) {
    rows_.clear();
    while (static_cast<int64_t>(rows_.size()) < config_.batch_size) {
      std::optional<int64_t> row = input_->next_row();
      if (!row) break;
      rows_.push_back(*row);
    }
    if (rows_.empty()) return std::nullopt;
    if (config_.drop_remainder && static_cast<int64_t>(rows_.size()) < config_.batch_size)
      return std::nullopt;
    int64_t count = static_cast<int64_t>(rows_.size());
    Element out;
    for (const RowStore::Column& column : store.columns) {
      Shape shape{count};
      shape.insert(shape.end(), column.row_shape.begin(), column.row_shape.end());
      Tensor batch = Tensor::empty(shape, column.dtype);
      char* dst = element_pointer(batch);
      if (column.row_bytes)
        for (int64_t row : rows_) {
          copy_elements(dst, store.row_data(column, row), column.row_bytes, column.dtype);
          dst += column.row_bytes;
        }
      switch (column.role) {
        case RowStore::Role::kFeature:
          out.features.emplace(column.name, std::move(batch));
          break;
        case RowStore::Role::kLabels:
          out.labels = std::move(batch);
          break;
        case RowStore::Role::kValue:
          out.value = std::move(batch);
          break;
      }
    }
    return out;
  }

  std::unique_ptr<IteratorBase> input_;
  const BatchConfig& config_;
  std::vector<int64_t> rows_;  // reused between batches
  std::set<std::string> ragged_;
  std::vector<Element> elements_;  // reused between batches
};

class BatchNode final : public BatchStage {
 public:
  BatchNode(NodePtr input, BatchConfig config)
      : input_(std::move(input)), config_(std::move(config)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<BatchIterator>(input_->make_iterator(context), config_);
  }
  std::string name() const override {
    switch (config_.kind) {
      case BatchConfig::Kind::kPadded:
        return "padded_batch";
      case BatchConfig::Kind::kRagged:
        return "ragged_batch";
      case BatchConfig::Kind::kDense:
        break;
    }
    return "batch";
  }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override {
    int64_t in = input_->cardinality();
    if (in < 0) return in;
    return config_.drop_remainder ? in / config_.batch_size
                                  : (in + config_.batch_size - 1) / config_.batch_size;
  }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<BatchNode>(std::move(input), config_);
  }
  const BatchConfig& config() const override { return config_; }
  NodePtr with_batch_size(int64_t batch_size) const override {
    BatchConfig config = config_;
    config.batch_size = batch_size;
    return std::make_shared<BatchNode>(input_, std::move(config));
  }

 private:
  NodePtr input_;
  BatchConfig config_;
};

}  // namespace

NodePtr make_batch_node(NodePtr input, BatchConfig config) {
  return std::make_shared<BatchNode>(std::move(input), std::move(config));
}

}  // namespace est::data
