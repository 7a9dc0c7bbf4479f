// Dataset's methods: argument checks with clear messages, then the stage constructors.
// Iterator: the public handle on the last stage's iterator, the elements given back to it, and the
// framing of saved states.
#include "data/dataset.h"

#include <iterator>
#include <thread>

#include "data/node.h"
#include "data/stages.h"
#include "ops/autograd.h"
#include "ops/copy.h"

namespace est::data {

namespace {

constexpr std::string_view kStateMagic = "est.data.iterator/1";
// A state with elements given back (put_back): their count and, the next one first, each
// element's device and its host copy; then the stages as in kStateMagic's. States without any
// keep the first header.
constexpr std::string_view kStateWithPutBackMagic = "est.data.iterator/1+put_back";

// The device of an element's tensors that are not on the host (prefetch_to_device's), or the CPU.
ops::Device element_device(const Element& element) {
  ops::Device device = ops::Device::cpu();
  for_each_component(element, [&](std::string_view, const Tensor& tensor) {
    if (!tensor.device().is_cpu()) device = tensor.device();
  });
  return device;
}

// `element` with every tensor moved to `device`, string tensors excepted (they stay on the host).
Element element_on(const Element& element, ops::Device device) {
  ops::NoGradGuard no_grad;
  Element out = element;
  auto move = [&](Tensor& t) {
    if (t.defined() && t.dtype() != DType::kString && t.device() != device)
      t = ops::copy_to(t, device);
  };
  for (auto& [name, tensor] : out.features) move(tensor);
  move(out.labels);
  move(out.value);
  return out;
}

void require_positive(int64_t value, std::string_view method, std::string_view argument) {
  if (value <= 0)
    throw InvalidArgumentError("Dataset::" + std::string(method) + ": " + std::string(argument) +
                               " must be positive, got " + std::to_string(value));
}

void require_parallelism(int64_t value, std::string_view method) {
  if (value != kAutotune && value <= 0)
    throw InvalidArgumentError("Dataset::" + std::string(method) +
                               ": num_parallel_calls must be positive or kAutotune, got " +
                               std::to_string(value));
}

}  // namespace

int64_t IteratorBase::skip(int64_t count) {
  int64_t skipped = 0;
  while (skipped < count && next()) ++skipped;
  return skipped;
}

std::optional<int64_t> IteratorBase::next_row() {
  throw InternalError("next_row() called on a stage without a row store");
}

NodePtr DatasetNode::with_input(NodePtr) const {
  throw InternalError("DatasetNode::with_input on the source '" + name() + "', which has no input");
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t autotune_parallelism() {
  return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
}

// --- Iterator ---

Iterator::Iterator(std::unique_ptr<IteratorBase> impl, std::shared_ptr<const DatasetNode> pipeline)
    : pipeline_(std::move(pipeline)), impl_(std::move(impl)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&& other) noexcept {
  impl_ = std::move(other.impl_);  // the old stages go before the pipeline they refer to
  pipeline_ = std::move(other.pipeline_);
  return *this;
}
Iterator::~Iterator() = default;

std::optional<Element> Iterator::next() {
  if (!impl_) throw FailedPreconditionError("Iterator::next on a moved-from iterator");
  if (!put_back_.empty()) {
    Element element = std::move(put_back_.back());
    put_back_.pop_back();
    return element;
  }
  return impl_->next();
}

void Iterator::put_back(std::vector<Element> elements) {
  if (!impl_) throw FailedPreconditionError("Iterator::put_back on a moved-from iterator");
  for (auto it = elements.rbegin(); it != elements.rend(); ++it)
    put_back_.push_back(std::move(*it));
}

std::string Iterator::save_state() {
  if (!impl_) throw FailedPreconditionError("Iterator::save_state on a moved-from iterator");
  StateWriter writer;
  if (put_back_.empty()) {
    writer.write_string(kStateMagic);
  } else {
    writer.write_string(kStateWithPutBackMagic);
    writer.write_u64(put_back_.size());
    for (auto it = put_back_.rbegin(); it != put_back_.rend(); ++it) {
      ops::Device device = element_device(*it);
      writer.write_string(device.str());
      writer.write_element(device.is_cpu() ? *it : element_on(*it, ops::Device::cpu()));
    }
  }
  impl_->save(writer);
  return writer.take();
}

void Iterator::restore_state(std::string_view state) {
  if (!impl_) throw FailedPreconditionError("Iterator::restore_state on a moved-from iterator");
  StateReader reader(state);
  std::string magic;
  try {
    magic = reader.read_string();
  } catch (const DataLossError&) {
    magic.clear();
  }
  if (magic != kStateMagic && magic != kStateWithPutBackMagic)
    throw InvalidArgumentError("Iterator::restore_state: these " + std::to_string(state.size()) +
                               " bytes are not an input-pipeline state (no '" +
                               std::string(kStateMagic) +
                               "' header); pass what Iterator::save_state returned");
  std::vector<Element> put_back;
  if (magic == kStateWithPutBackMagic) {
    uint64_t count = reader.read_u64();
    // Each element takes bytes: a count beyond the state's size is a corrupt state.
    if (count > state.size())
      throw InvalidArgumentError("Iterator::restore_state: the state claims " +
                                 std::to_string(count) + " elements given back in " +
                                 std::to_string(state.size()) +
                                 " bytes; pass what Iterator::save_state returned");
    for (uint64_t i = 0; i < count; ++i) {
      ops::Device device = ops::Device::parse(reader.read_string());
      Element element = reader.read_element();
      put_back.push_back(device.is_cpu() ? std::move(element) : element_on(element, device));
    }
  }
  impl_->restore(reader);
  if (!reader.at_end())
    throw InvalidArgumentError(
        "Iterator::restore_state: " + std::to_string(state.size() - reader.position()) +
        " bytes left over after restoring every stage: the state was "
        "saved from a different pipeline");
  put_back_.clear();
  put_back_.insert(put_back_.end(), std::make_move_iterator(put_back.rbegin()),
                   std::make_move_iterator(put_back.rend()));
}

// --- Dataset ---

Dataset::Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {
  if (!node_) throw InvalidArgumentError("Dataset: null pipeline node");
}

Dataset Dataset::from_tensor_slices(const Tensor& tensor) {
  if (!tensor.defined())
    throw InvalidArgumentError("Dataset::from_tensor_slices: the tensor is undefined");
  Element element(tensor);
  return Dataset(make_slices_node([element] { return element; }, "from_tensor_slices"));
}

Dataset Dataset::from_tensor_slices(const Features& features, const Tensor& labels) {
  if (features.empty() && !labels.defined())
    throw InvalidArgumentError("Dataset::from_tensor_slices: no features and no labels given");
  Element element(features, labels);
  return Dataset(make_slices_node([element] { return element; }, "from_tensor_slices"));
}

Dataset Dataset::from_tensors(const Element& element) {
  return Dataset(make_elements_node({element}));
}

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) throw InvalidArgumentError("Dataset::range: step must not be 0");
  return Dataset(make_range_node(start, stop, step));
}

Dataset Dataset::from_generator(GeneratorFactory factory) {
  if (!factory) throw InvalidArgumentError("Dataset::from_generator: empty factory");
  return Dataset(make_generator_node(std::move(factory)));
}

Dataset Dataset::from_strings(std::vector<std::string> strings) {
  std::vector<Element> elements;
  elements.reserve(strings.size());
  for (const auto& s : strings) elements.emplace_back(bytes_tensor(s));
  return Dataset(make_elements_node(std::move(elements), "from_strings"));
}

Dataset Dataset::map(MapFn fn, int64_t num_parallel_calls) const {
  if (!fn) throw InvalidArgumentError("Dataset::map: empty function");
  require_parallelism(num_parallel_calls, "map");
  return Dataset(make_map_node(node_, std::move(fn), num_parallel_calls));
}

Dataset Dataset::filter(PredicateFn predicate) const {
  if (!predicate) throw InvalidArgumentError("Dataset::filter: empty predicate");
  return Dataset(make_filter_node(node_, std::move(predicate)));
}

Dataset Dataset::shuffle(int64_t buffer_size, std::optional<uint64_t> seed,
                         bool reshuffle_each_iteration) const {
  require_positive(buffer_size, "shuffle", "buffer_size");
  return Dataset(make_shuffle_node(node_, buffer_size, seed, reshuffle_each_iteration));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  require_positive(batch_size, "batch", "batch_size");
  return Dataset(make_batch_node(node_, {.kind = BatchConfig::Kind::kDense,
                                         .batch_size = batch_size,
                                         .drop_remainder = drop_remainder}));
}

Dataset Dataset::padded_batch(int64_t batch_size, PaddedShapes padded_shapes,
                              PaddingValues padding_values, bool drop_remainder) const {
  require_positive(batch_size, "padded_batch", "batch_size");
  for (const auto& [name, shape] : padded_shapes)
    for (int64_t d : shape)
      if (d < -1)
        throw InvalidArgumentError("Dataset::padded_batch: padded shape " + ops::shape_str(shape) +
                                   " for '" + name + "' has a dimension below -1");
  return Dataset(make_batch_node(node_, {.kind = BatchConfig::Kind::kPadded,
                                         .batch_size = batch_size,
                                         .drop_remainder = drop_remainder,
                                         .padded_shapes = std::move(padded_shapes),
                                         .padding_values = std::move(padding_values)}));
}

Dataset Dataset::ragged_batch(int64_t batch_size, std::vector<std::string> ragged_features,
                              bool drop_remainder) const {
  require_positive(batch_size, "ragged_batch", "batch_size");
  if (ragged_features.empty())
    throw InvalidArgumentError(
        "Dataset::ragged_batch: no ragged feature names given; use batch() instead");
  return Dataset(make_batch_node(node_, {.kind = BatchConfig::Kind::kRagged,
                                         .batch_size = batch_size,
                                         .drop_remainder = drop_remainder,
                                         .ragged_features = std::move(ragged_features)}));
}

Dataset Dataset::repeat(int64_t count) const {
  if (count < -1)
    throw InvalidArgumentError("Dataset::repeat: count must be -1 (forever) or >= 0, got " +
                               std::to_string(count));
  return Dataset(make_repeat_node(node_, count));
}

Dataset Dataset::cache() const { return Dataset(make_memory_cache_node(node_)); }

Dataset Dataset::cache(const std::string& path) const {
  if (path.empty()) return cache();
  return Dataset(make_file_cache_node(node_, path));
}

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  if (num_shards == kShardHint) return Dataset(make_shard_node(node_, num_shards, index));
  require_positive(num_shards, "shard", "num_shards");
  if (index < 0 || index >= num_shards)
    throw InvalidArgumentError("Dataset::shard: index " + std::to_string(index) +
                               " is outside [0, " + std::to_string(num_shards) +
                               "); use InputContext::input_pipeline_id");
  return Dataset(make_shard_node(node_, num_shards, index));
}

Dataset Dataset::take(int64_t count) const {
  if (count < -1)
    throw InvalidArgumentError("Dataset::take: count must be -1 (all) or >= 0, got " +
                               std::to_string(count));
  return Dataset(make_take_node(node_, count));
}

Dataset Dataset::skip(int64_t count) const {
  if (count < -1)
    throw InvalidArgumentError("Dataset::skip: count must be -1 (all) or >= 0, got " +
                               std::to_string(count));
  return Dataset(make_skip_node(node_, count));
}

Dataset Dataset::prefetch(int64_t buffer_size) const {
  if (buffer_size != kAutotune && buffer_size <= 0)
    throw InvalidArgumentError(
        "Dataset::prefetch: buffer_size must be positive or kAutotune, got " +
        std::to_string(buffer_size));
  return Dataset(make_prefetch_node(node_, buffer_size == kAutotune ? 2 : buffer_size));
}

Dataset Dataset::interleave(InterleaveFn fn, int64_t cycle_length, int64_t block_length,
                            int64_t num_parallel_calls) const {
  if (!fn) throw InvalidArgumentError("Dataset::interleave: empty function");
  if (cycle_length != kAutotune) require_positive(cycle_length, "interleave", "cycle_length");
  require_positive(block_length, "interleave", "block_length");
  require_parallelism(num_parallel_calls, "interleave");
  return Dataset(make_interleave_node(
      node_, std::move(fn), cycle_length == kAutotune ? autotune_parallelism() : cycle_length,
      block_length, num_parallel_calls));
}

Dataset Dataset::with_options(Options options) const {
  return Dataset(make_options_node(node_, std::move(options)));
}

Options Dataset::options() const {
  // From the last stage to the source (through interleave's input, not the datasets it opens):
  // options set nearer the end were set later and win.
  std::vector<const Options*> found;
  for (const DatasetNode* node = node_.get(); node; node = node->input().get())
    if (const auto* stage = dynamic_cast<const OptionsStage*>(node))
      found.push_back(&stage->options());
  Options merged;
  for (auto it = found.rbegin(); it != found.rend(); ++it) merged = merged.merge(**it);
  return merged;
}

Iterator Dataset::iterator() const { return Iterator(node_->make_iterator({}), node_); }

}  // namespace est::data
