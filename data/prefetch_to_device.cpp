// prefetch_to_device(device, n): tf.data.experimental.prefetch_to_device. The last stage of a
// pipeline; its elements come out with every tensor on `device`.
//
// On a GPU a background thread takes the next element, copies each tensor into a pinned host
// buffer and queues its host -> device copy on the device's copy stream, then records an event;
// up to n elements wait in a bounded queue. next() hands one out after making the compute
// stream wait for its event (ops/cuda/async_copy.h), so the copy of the next batch overlaps the
// current step and neither the step nor the host waits for a copy it does not need. On a CPU
// device it is prefetch(n): the tensors are already there. A sparse tensor moves as its
// indices and values; a string tensor cannot leave the CPU (Tensor::empty says so).
//
// State (state.h) is prefetch's: the queued elements, from the host copies kept beside the
// device ones, then the input's position, which is past them; restoring queues their copies
// again. Follows tensorflow/python/data/experimental/ops/prefetching_ops.py for the name, the
// default buffer and "last transformation".
#include <algorithm>

#include "data/dataset.h"
#include "data/prefetch_queue.h"
#include "data/stages.h"
#include "ops/backend.h"
#include "ops/cuda/async_copy.h"

namespace est::data {
namespace {

#if EST_HAVE_CUDA

Tensor to_device(const Tensor& host, ops::Device device) {
  if (!host.defined()) return host;
  if (host.is_sparse())
    return Tensor::sparse(to_device(host.indices(), device), to_device(host.values(), device),
                          host.shape());
  Tensor target = Tensor::empty(host.shape(), host.dtype(), device);
  ops::cuda::copy_to_device_async(host, target);
  return target;
}

// An element in the queue: as read (for the state), on the device, and the event after its
// copies.
struct Staged {
  Element host;
  Element device;
  ops::cuda::Event copied = nullptr;
};

// The queue hands over item by item (low water capacity - 1, wake at 1): the step wants its
// next batch as soon as its copy is queued.
class DevicePrefetchIterator final : public IteratorBase {
 public:
  DevicePrefetchIterator(std::unique_ptr<IteratorBase> input, ops::Device device, int64_t capacity)
      : input_(std::move(input)),
        device_(device),
        queue_([this] { return produce(); }, capacity_of(capacity), capacity_of(capacity) - 1, 1) {}

  ~DevicePrefetchIterator() override {
    queue_.stop();
    try {
      clear_queue();
    } catch (...) {  // a failing device while unwinding: nothing left to release it to
    }
  }

  std::optional<Element> next() override {
    std::optional<Staged> staged = queue_.pop();
    if (!staged) return std::nullopt;
    ops::cuda::compute_stream_wait(device_.index, staged->copied);
    return std::move(staged->device);
  }

  void save(StateWriter& writer) override {
    queue_.stop();
    writer.begin_stage("prefetch_to_device");
    writer.write_bool(queue_.finished());
    write_error(writer, queue_.error());
    writer.write_u64(queue_.items().size());
    for (const Staged& staged : queue_.items()) writer.write_element(staged.host);
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    queue_.stop();
    reader.expect_stage("prefetch_to_device");
    const bool finished = reader.read_bool();
    queue_.set_state(finished, read_error(reader));
    const uint64_t count = reader.read_u64();
    clear_queue();
    for (uint64_t i = 0; i < count; ++i) queue_.items().push_back(stage(reader.read_element()));
    input_->restore(reader);
  }

 private:
  static size_t capacity_of(int64_t capacity) {
    return static_cast<size_t>(std::max<int64_t>(capacity, 1));
  }

  std::optional<Staged> produce() {
    std::optional<Element> element = input_->next();
    if (!element) return std::nullopt;
    return stage(std::move(*element));
  }

  Staged stage(Element host) const {
    Staged staged;
    staged.device.labels = to_device(host.labels, device_);
    staged.device.value = to_device(host.value, device_);
    for (const auto& [name, tensor] : host.features)
      staged.device.features[name] = to_device(tensor, device_);
    staged.copied = ops::cuda::copy_stream_event(device_.index);
    staged.host = std::move(host);
    return staged;
  }

  // Gives the queued elements' events back (their copies may still run; nothing waits on them).
  void clear_queue() {
    for (Staged& staged : queue_.items())
      if (staged.copied != nullptr) ops::cuda::compute_stream_wait(device_.index, staged.copied);
    queue_.items().clear();
  }

  std::unique_ptr<IteratorBase> input_;
  ops::Device device_;
  PrefetchQueue<Staged> queue_;
};

#endif  // EST_HAVE_CUDA

class PrefetchToDeviceNode final : public DatasetNode {
 public:
  PrefetchToDeviceNode(NodePtr input, ops::Device device, int64_t buffer_size)
      : input_(std::move(input)), device_(device), buffer_size_(buffer_size) {}

  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    if (!ops::backend_available(ops::Backend::kCuda))
      throw FailedPreconditionError(
          "prefetch_to_device(" + device_.str() + "): no GPU can be used here (" +
          ops::backend_unavailable_reason(ops::Backend::kCuda) +
          "); prefetch to a GPU only where one is present, or use prefetch()");
#if EST_HAVE_CUDA
    ops::cuda::require_device(device_.index);
    return std::make_unique<DevicePrefetchIterator>(input_->make_iterator(context), device_,
                                                    buffer_size_);
#else
    (void)context;
    throw FailedPreconditionError("prefetch_to_device: this build has no CUDA backend");
#endif
  }
  std::string name() const override { return "prefetch_to_device"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<PrefetchToDeviceNode>(std::move(input), device_, buffer_size_);
  }

 private:
  NodePtr input_;
  ops::Device device_;
  int64_t buffer_size_;
};

}  // namespace

Dataset Dataset::prefetch_to_device(ops::Device device, int64_t buffer_size) const {
  if (buffer_size <= 0 && buffer_size != kAutotune)
    throw InvalidArgumentError(
        "Dataset::prefetch_to_device: buffer_size must be positive or "
        "kAutotune, got " +
        std::to_string(buffer_size));
  const int64_t size = buffer_size == kAutotune ? 2 : buffer_size;
  if (device.is_cpu()) return Dataset(make_prefetch_node(node_, size));
  return Dataset(std::make_shared<PrefetchToDeviceNode>(node_, device, size));
}

Dataset Dataset::prefetch_to_device(const std::string& device, int64_t buffer_size) const {
  return prefetch_to_device(ops::Device::parse(device), buffer_size);
}

}  // namespace est::data
