// The two CPU all-reduce algorithms over plain host buffers, shared out over the replica
// threads by element ranges (all_reduce_slice), or whole on one thread (all_reduce: one slice).
// They run after every replica has deposited its tensors, and the slices write disjoint
// ranges, so no locking is needed here. On GPU tensors they reduce host copies on one thread
// (TF reduces through copies to one device too); NcclAllReduce is in nccl_all_reduce.cpp.
#include "distribute/collectives/cross_device_ops.h"

#include <algorithm>
#include <string>

#include "ops/autograd.h"
#include "ops/error.h"
#include "ops/math.h"

namespace est::distribute {

namespace {

// Checks that entry `index` agrees across replicas; false when it is undefined everywhere.
bool check_entry(const std::vector<std::vector<ops::Tensor>*>& per_replica, size_t index) {
  const ops::Tensor& first = (*per_replica[0])[index];
  for (size_t r = 1; r < per_replica.size(); ++r) {
    const ops::Tensor& other = (*per_replica[r])[index];
    if (first.defined() != other.defined())
      throw InvalidArgumentError("all_reduce: tensor " + std::to_string(index) +
                                 " is defined on replica 0 but not on replica " +
                                 std::to_string(r) +
                                 " (or the reverse); every replica must compute the same "
                                 "gradients");
    if (!first.defined()) continue;
    if (other.shape() != first.shape() || other.dtype() != first.dtype())
      throw InvalidArgumentError("all_reduce: tensor " + std::to_string(index) +
                                 " differs between replica 0 and replica " + std::to_string(r) +
                                 " in shape or dtype; replicas must run the same model");
  }
  if (!first.defined()) return false;
  if (first.dtype() != ops::DType::kF32 && first.dtype() != ops::DType::kF64)
    throw InvalidArgumentError("all_reduce: tensor " + std::to_string(index) +
                               " is not float32 or float64; only floating gradients are reduced");
  return true;
}

}  // namespace

void CrossDeviceOps::check_devices(const std::vector<ops::Device>& /*devices*/) const {}

namespace {

class DoneReduction : public PendingReduction {
 public:
  explicit DoneReduction(std::vector<ops::Tensor> sums) : sums_(std::move(sums)) {}
  std::vector<ops::Tensor> wait() override { return std::move(sums_); }

 private:
  std::vector<ops::Tensor> sums_;
};

}  // namespace

void CrossDeviceOps::reduce_scaled_across_workers(std::vector<ops::Tensor>& tensors,
                                                  const std::vector<double>& factors,
                                                  const std::string& what) {
  ops::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined()) tensors[i] = ops::mul(tensors[i], factors[i]);  // fresh buffers
  reduce_across_workers(tensors, what);
}

std::unique_ptr<PendingReduction> CrossDeviceOps::start_reduce(std::vector<ops::Tensor> inputs,
                                                               std::vector<double> factors,
                                                               std::string what) {
  // This class's own scaling (fresh buffers), whatever a subclass does for host tensors.
  CrossDeviceOps::reduce_scaled_across_workers(inputs, factors, what);
  return std::make_unique<DoneReduction>(std::move(inputs));
}

void NcclAllReduce::check_devices(const std::vector<ops::Device>& devices) const {
  for (const auto& device : devices)
    if (!device.is_cuda())
      throw InvalidArgumentError(
          "MirroredStrategy: NcclAllReduce needs GPU devices, but " + device.str() +
          " is a CPU device; use ReductionToOneDevice or HierarchicalCopyAllReduce for CPU "
          "devices");
#if !EST_HAVE_CUDA
  throw InvalidArgumentError(
      "MirroredStrategy: NcclAllReduce needs the CUDA backend, which this build does not have "
      "(configured with -Dcuda=disabled)");
#endif
}

namespace {

enum class Algorithm : uint8_t { kOneDevice, kTree };

// The lists agree in length.
void check_lists(const std::vector<std::vector<ops::Tensor>*>& per_replica) {
  size_t count = per_replica[0]->size();
  for (size_t r = 1; r < per_replica.size(); ++r)
    if (per_replica[r]->size() != count)
      throw InvalidArgumentError("all_reduce: replica 0 has " + std::to_string(count) +
                                 " tensors but replica " + std::to_string(r) + " has " +
                                 std::to_string(per_replica[r]->size()) +
                                 "; every replica must reduce the same list");
}

// Elements [begin, end) of entry `index`: the sum over replicas into outputs[0], then copied
// into the other replicas' outputs, block by block so that each block is summed and copied
// while it is still in the cache.
template <class T>
void reduce_range(Algorithm algorithm, double factor,
                  const std::vector<std::vector<ops::Tensor>*>& inputs,
                  const std::vector<std::vector<ops::Tensor>*>& outputs, size_t index,
                  int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 4096;
  size_t replicas = inputs.size();
  auto in = [&](size_t r) { return (*inputs[r])[index].data<T>(); };
  auto out = [&](size_t r) { return (*outputs[r])[index].data<T>(); };
  bool tree = algorithm == Algorithm::kTree && replicas > 2;
  std::vector<std::vector<T>> partial(tree ? replicas : 0);
  for (int64_t first = begin; first < end; first += kBlock) {
    int64_t n = std::min(kBlock, end - first);
    T* total = out(0) + first;
    if (!tree) {
      std::copy(in(0) + first, in(0) + first + n, total);
      for (size_t r = 1; r < replicas; ++r) {
        const T* source = in(r) + first;
        for (int64_t i = 0; i < n; ++i) total[i] += source[i];
      }
    } else {
      // Pairwise tree: at stride s, replica r (a multiple of 2s) takes in replica r + s.
      for (size_t r = 0; r < replicas; ++r) partial[r].assign(in(r) + first, in(r) + first + n);
      for (size_t stride = 1; stride < replicas; stride *= 2)
        for (size_t r = 0; r + stride < replicas; r += 2 * stride)
          for (int64_t i = 0; i < n; ++i) partial[r][size_t(i)] += partial[r + stride][size_t(i)];
      std::copy(partial[0].begin(), partial[0].end(), total);
    }
    if (factor != 1.0)
      for (int64_t i = 0; i < n; ++i) total[i] = static_cast<T>(total[i] * factor);
    for (size_t r = 1; r < replicas; ++r)
      if (out(r) != out(0)) std::copy(total, total + n, out(r) + first);
  }
}

bool on_device(const std::vector<std::vector<ops::Tensor>*>& lists) {
  for (const auto* list : lists)
    for (const ops::Tensor& t : *list)
      if (t.defined() && !t.device().is_cpu()) return true;
  return false;
}

void reduce_slice_with(Algorithm algorithm, const std::vector<double>& factors,
                       const std::vector<std::vector<ops::Tensor>*>& inputs,
                       const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                       int num_slices);

// The algorithms on GPU tensors: through host copies, on the calling thread (slice 0; the
// other slices have nothing to do). The sums are then bitwise the CPU algorithm's, copied
// into every replica's outputs on its device.
void reduce_through_host(Algorithm algorithm, const std::vector<double>& factors,
                         const std::vector<std::vector<ops::Tensor>*>& inputs,
                         const std::vector<std::vector<ops::Tensor>*>& outputs, int slice) {
  check_lists(inputs);
  if (slice != 0) return;
  ops::NoGradGuard no_grad;
  size_t count = inputs[0]->size();
  std::vector<std::vector<ops::Tensor>> host_inputs(inputs.size());
  std::vector<ops::Tensor> host_outputs(count);
  for (size_t r = 0; r < inputs.size(); ++r)
    for (const ops::Tensor& t : *inputs[r])
      host_inputs[r].push_back(t.defined() ? t.to(ops::Device::cpu()) : t);
  for (size_t i = 0; i < count; ++i) {
    const ops::Tensor& t = (*inputs[0])[i];
    if (t.defined()) host_outputs[i] = ops::Tensor::empty(t.shape(), t.dtype());
  }
  std::vector<std::vector<ops::Tensor>*> in, out(inputs.size(), &host_outputs);
  for (auto& list : host_inputs) in.push_back(&list);
  reduce_slice_with(algorithm, factors, in, out, 0, 1);
  for (size_t r = 0; r < outputs.size(); ++r)
    for (size_t i = 0; i < count; ++i)
      if (host_outputs[i].defined()) (*outputs[r])[i].copy_from(host_outputs[i]);
}

void reduce_slice_with(Algorithm algorithm, const std::vector<double>& factors,
                       const std::vector<std::vector<ops::Tensor>*>& inputs,
                       const std::vector<std::vector<ops::Tensor>*>& outputs, int slice,
                       int num_slices) {
  if (inputs.empty()) return;
  if (on_device(inputs) || on_device(outputs)) {
    reduce_through_host(algorithm, factors, inputs, outputs, slice);
    return;
  }
  check_lists(inputs);
  size_t count = inputs[0]->size();
  if (factors.size() != count)
    throw InternalError("all_reduce_slice: " + std::to_string(factors.size()) + " factors for " +
                        std::to_string(count) + " tensors");
  std::vector<bool> defined(count);
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    defined[i] = check_entry(inputs, i);
    if (defined[i]) total += (*inputs[0])[i].numel();
  }
  int64_t first = total * slice / num_slices, last = total * (slice + 1) / num_slices;
  int64_t offset = 0;  // of entry i in the sequence of all elements
  for (size_t i = 0; i < count && offset < last; ++i) {
    if (!defined[i]) continue;
    int64_t n = (*inputs[0])[i].numel();
    int64_t begin = std::max(first, offset) - offset, end = std::min(last, offset + n) - offset;
    if (begin < end) {
      if ((*inputs[0])[i].dtype() == ops::DType::kF32)
        reduce_range<float>(algorithm, factors[i], inputs, outputs, i, begin, end);
      else
        reduce_range<double>(algorithm, factors[i], inputs, outputs, i, begin, end);
    }
    offset += n;
  }
}

}  // namespace

void ReductionToOneDevice::reduce_slice(const std::vector<double>& factors,
                                        const std::vector<std::vector<ops::Tensor>*>& inputs,
                                        const std::vector<std::vector<ops::Tensor>*>& outputs,
                                        int slice, int num_slices) const {
  reduce_slice_with(Algorithm::kOneDevice, factors, inputs, outputs, slice, num_slices);
}

void HierarchicalCopyAllReduce::reduce_slice(const std::vector<double>& factors,
                                             const std::vector<std::vector<ops::Tensor>*>& inputs,
                                             const std::vector<std::vector<ops::Tensor>*>& outputs,
                                             int slice, int num_slices) const {
  reduce_slice_with(Algorithm::kTree, factors, inputs, outputs, slice, num_slices);
}

#if !EST_HAVE_CUDA
void NcclAllReduce::reduce_slice(const std::vector<double>& /*factors*/,
                                 const std::vector<std::vector<ops::Tensor>*>& /*inputs*/,
                                 const std::vector<std::vector<ops::Tensor>*>& /*outputs*/,
                                 int /*slice*/, int /*num_slices*/) const {
  throw FailedPreconditionError(
      "all_reduce: NcclAllReduce needs the CUDA backend, which this build does not have");
}
#endif

void all_reduce(const CrossDeviceOps& cross_device_ops, ReduceOp op,
                std::vector<std::vector<ops::Tensor>*>& per_replica) {
  if (per_replica.empty()) return;
  check_lists(per_replica);
  // One slice covering everything, into fresh buffers (an input may alias a variable's .grad).
  size_t count = per_replica[0]->size();
  std::vector<std::vector<ops::Tensor>> results(per_replica.size(),
                                                std::vector<ops::Tensor>(count));
  std::vector<std::vector<ops::Tensor>*> outputs;
  for (size_t r = 0; r < per_replica.size(); ++r) {
    for (size_t i = 0; i < count; ++i) {
      const ops::Tensor& input = (*per_replica[r])[i];
      if (input.defined())
        results[r][i] = ops::Tensor::empty(input.shape(), input.dtype(), input.device());
    }
    outputs.push_back(&results[r]);
  }
  double factor = op == ReduceOp::kMean ? 1.0 / static_cast<double>(per_replica.size()) : 1.0;
  cross_device_ops.reduce_slice(std::vector<double>(count, factor), per_replica, outputs, 0, 1);
  for (size_t r = 0; r < per_replica.size(); ++r) *per_replica[r] = std::move(results[r]);
}

}  // namespace est::distribute
