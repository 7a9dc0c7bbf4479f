// The tracer: a KernelObserver that turns each kernel call into a TracedNode (see trace.h).
#include "export/trace.h"

#include <tuple>
#include <utility>

#include "ops/autograd.h"
#include "ops/registry.h"

namespace est::serving {
namespace {

using ops::OpId;

// Every registry op, for the switch that finds an unsupported kernel's outputs.
#define EST_FOR_EACH_OP(X)                                                                       \
  X(kFill)                                                                                       \
  X(kCopy)                                                                                       \
  X(kCast)                                                                                       \
  X(kBinary)                                                                                     \
  X(kBinaryGradient)                                                                             \
  X(kCompare)                                                                                    \
  X(kUnary) X(kUnaryGradient) X(kAddScaled) X(kBroadcastTo) X(kReduce) X(kArgmax) X(kTranspose)  \
      X(kConcat) X(kSlice) X(kSliceGradient) X(kGather) X(kGatherGradient) X(kOneHot)            \
          X(kDropoutMask) X(kSoftmax) X(kSoftmaxGradient) X(kSparseCrossEntropy)                 \
              X(kSparseCrossEntropyGradient) X(kCrossEntropy) X(kCrossEntropyGradient)           \
                  X(kSigmoidCrossEntropy) X(kSigmoidCrossEntropyGradient) X(kMatmul) X(kBiasAdd) \
                      X(kActivation) X(kActivationGradient) X(kBiasGradient) X(kConv2D)          \
                          X(kConv2DBackwardData) X(kConv2DBackwardWeights)                       \
                              X(kConv2DWeightsFromOutput) X(kPool2D) X(kPool2DGradient)          \
                                  X(kBatchNorm) X(kBatchNormGradient) X(kApplySgd)               \
                                      X(kApplyMomentum) X(kApplyAdam) X(kApplyAdagrad)           \
                                          X(kApplyRmsprop)

// Where a tensor's elements live: its identity for the tracer (string tensors hold
// std::string objects, which raw_data() refuses to hand out as bytes).
const void* storage_of(const Tensor& tensor) {
  if (tensor.dtype() == DType::kString) return tensor.data<std::string>();
  return tensor.raw_data();
}

template <OpId id>
const ops::KernelArgs<id>& args_of(const void* args) {
  return *static_cast<const ops::KernelArgs<id>*>(args);
}

// The tensors a kernel writes: its `Tensor&` and non-null `Tensor*` parameters.
void collect_output(std::vector<const Tensor*>& outputs, Tensor& tensor) {
  outputs.push_back(&tensor);
}
void collect_output(std::vector<const Tensor*>& outputs, Tensor* tensor) {
  if (tensor != nullptr) outputs.push_back(tensor);
}
void collect_output(std::vector<const Tensor*>&, const Tensor&) {}
template <class T>
void collect_output(std::vector<const Tensor*>&, const T&) {}

template <OpId id>
std::vector<const Tensor*> written_by(const void* args) {
  std::vector<const Tensor*> outputs;
  std::apply([&](auto&&... arg) { (collect_output(outputs, arg), ...); }, args_of<id>(args));
  return outputs;
}

std::vector<const Tensor*> written_tensors(OpId id, const void* args) {
  switch (id) {
#define EST_CASE(ID) \
  case OpId::ID:     \
    return written_by<OpId::ID>(args);
    EST_FOR_EACH_OP(EST_CASE)
#undef EST_CASE
  }
  return {};
}

class Tracer : public ops::KernelObserver, public feature_column::LookupObserver {
 public:
  explicit Tracer(const std::vector<std::pair<std::string, Tensor>>& names) {
    for (const auto& [name, tensor] : names)
      if (tensor.defined() && tensor.numel() > 0) names_[storage_of(tensor)] = name;
  }

  Trace trace_;

  // A new value written by a kernel (or a graph input): the storage's value from now on.
  int define(const Tensor& tensor) {
    alive_.push_back(tensor);
    const int id = add_value(tensor);
    if (tensor.numel() > 0) views_[storage_of(tensor)] = {id};
    return id;
  }

  // The value a kernel reads: a known one (or a reshape of it), else a new constant.
  int resolve(const Tensor& tensor) {
    if (!tensor.defined()) return -1;
    alive_.push_back(tensor);
    if (tensor.numel() > 0) {
      auto found = views_.find(storage_of(tensor));
      if (found != views_.end()) {
        for (int id : found->second)
          if (trace_.values[id].shape == tensor.shape()) return id;
        const int id = add_value(tensor);
        TracedNode node{.kind = NodeKind::kReshape, .name = "reshape"};
        node.inputs = {found->second.front()};
        node.outputs = {id};
        trace_.nodes.push_back(std::move(node));
        found->second.push_back(id);
        return id;
      }
    }
    const int id = add_value(tensor);
    trace_.constants[id] = tensor.clone();
    if (tensor.numel() > 0) {
      auto named = names_.find(storage_of(tensor));
      if (named != names_.end()) trace_.constant_names[id] = named->second;
      views_[storage_of(tensor)] = {id};
    }
    return id;
  }

  void host_computed(const char* name, const Tensor& output) override {
    if (recording_ || !output.defined() || output.is_sparse()) return;
    TracedNode node{.kind = NodeKind::kHostComputed, .name = name};
    node.outputs = {define(output)};
    trace_.nodes.push_back(std::move(node));
  }

  void lookup_ran(const std::string& name, const feature_column::LookupTable& table,
                  const Tensor& input, const Tensor& output) override {
    if (recording_ || output.is_sparse() || input.is_sparse()) return;
    TracedNode node{.kind = NodeKind::kLookup, .name = name};
    node.inputs = {resolve(input)};
    node.member = static_cast<int>(trace_.lookups.size());
    trace_.lookups.push_back({name, table});
    node.outputs = {define(output)};
    trace_.nodes.push_back(std::move(node));
  }

  void kernel_ran(OpId id, const char* name, const void* args) override {
    if (recording_) return;  // the tracer's own copies of constants are not the model's
    recording_ = true;
    try {
      record(id, name, args);
    } catch (...) {
      recording_ = false;
      throw;
    }
    recording_ = false;
  }

 private:
  void record(OpId id, const char* name, const void* args) {
    TracedNode node{.op = id, .name = name};
    std::vector<const Tensor*> outputs;
    switch (id) {
      case OpId::kFill: {  // in place: later reads see a constant of the filled value
        const auto& [out, value] = args_of<OpId::kFill>(args);
        if (out.numel() > 0) views_.erase(storage_of(out));
        return;
      }
      case OpId::kCopy: {
        const auto& [source, target] = args_of<OpId::kCopy>(args);
        node.inputs = {resolve(source)};
        outputs = {&target};
        break;
      }
      case OpId::kCast: {
        const auto& [x, out] = args_of<OpId::kCast>(args);
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kBinary: {
        const auto& [op, a, b, out] = args_of<OpId::kBinary>(args);
        node.member = static_cast<int>(op);
        node.inputs = {resolve(a), resolve(b)};
        outputs = {&out};
        break;
      }
      case OpId::kCompare: {
        const auto& [op, a, b, out] = args_of<OpId::kCompare>(args);
        node.member = static_cast<int>(op);
        node.inputs = {resolve(a), resolve(b)};
        outputs = {&out};
        break;
      }
      case OpId::kUnary: {
        const auto& [op, params, x, y] = args_of<OpId::kUnary>(args);
        node.member = static_cast<int>(op);
        node.reals = {params.a, params.b};
        node.inputs = {resolve(x)};
        outputs = {&y};
        break;
      }
      case OpId::kBroadcastTo: {
        const auto& [x, out] = args_of<OpId::kBroadcastTo>(args);
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kReduce: {
        const auto& [op, x, axes, out] = args_of<OpId::kReduce>(args);
        node.member = static_cast<int>(op);
        node.ints.assign(axes.begin(), axes.end());
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kArgmax: {
        const auto& [x, axis, out] = args_of<OpId::kArgmax>(args);
        node.ints = {axis};
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kTranspose: {
        const auto& [x, perm, out] = args_of<OpId::kTranspose>(args);
        node.ints.assign(perm.begin(), perm.end());
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kConcat: {
        const auto& [inputs, axis, out] = args_of<OpId::kConcat>(args);
        for (const Tensor& input : inputs) node.inputs.push_back(resolve(input));
        node.ints = {axis};
        outputs = {&out};
        break;
      }
      case OpId::kSlice: {
        const auto& [x, begin, out] = args_of<OpId::kSlice>(args);
        node.ints = begin;
        node.inputs = {resolve(x)};
        outputs = {&out};
        break;
      }
      case OpId::kGather: {
        const auto& [params, indices, axis, out] = args_of<OpId::kGather>(args);
        node.ints = {axis};
        node.inputs = {resolve(params), resolve(indices)};
        outputs = {&out};
        break;
      }
      case OpId::kSoftmax: {
        const auto& [x, axis, log, y] = args_of<OpId::kSoftmax>(args);
        node.ints = {axis};
        node.flag_a = log;
        node.inputs = {resolve(x)};
        outputs = {&y};
        break;
      }
      case OpId::kMatmul: {
        const auto& [a, b, bias, out, dims, activation] = args_of<OpId::kMatmul>(args);
        node.flag_a = dims.transpose_a;
        node.flag_b = dims.transpose_b;
        node.activation = activation;
        node.inputs = {resolve(a), resolve(b), resolve(bias)};
        outputs = {&out};
        break;
      }
      case OpId::kBiasAdd: {
        const auto& [x, bias, out] = args_of<OpId::kBiasAdd>(args);
        node.inputs = {resolve(x), resolve(bias)};
        outputs = {&out};
        break;
      }
      case OpId::kActivation: {
        const auto& [x, activation, y] = args_of<OpId::kActivation>(args);
        node.activation = activation;
        node.inputs = {resolve(x)};
        outputs = {&y};
        break;
      }
      case OpId::kConv2D: {
        const auto& [input, kernel, bias, window, activation, output, saved] =
            args_of<OpId::kConv2D>(args);
        node.window = window;
        node.activation = activation;
        node.inputs = {resolve(input), resolve(kernel), resolve(bias)};
        outputs = {&output};
        break;
      }
      case OpId::kPool2D: {
        const auto& [input, window, kind, training, output, workspace] =
            args_of<OpId::kPool2D>(args);
        node.window = window;
        node.member = static_cast<int>(kind);
        node.inputs = {resolve(input)};
        outputs = {&output};
        break;
      }
      case OpId::kOneHot: {
        const auto& [indices, on_value, off_value, out] = args_of<OpId::kOneHot>(args);
        node.reals = {on_value, off_value};
        node.inputs = {resolve(indices)};
        outputs = {&out};
        break;
      }
      case OpId::kBatchNorm: {
        const auto& [x, gamma, beta, mean, variance, epsilon, training, y] =
            args_of<OpId::kBatchNorm>(args);
        if (training) {  // batch statistics: a training op, with no form in a serving graph
          node.kind = NodeKind::kUnsupported;
          node.name = "batch_norm_training";
          outputs = written_tensors(id, args);
          break;
        }
        node.reals = {epsilon};
        node.inputs = {resolve(x), resolve(gamma), resolve(beta), resolve(mean), resolve(variance)};
        outputs = {&y};
        break;
      }
      default:
        node.kind = NodeKind::kUnsupported;
        outputs = written_tensors(id, args);
        break;
    }
    for (const Tensor* output : outputs) node.outputs.push_back(define(*output));
    trace_.nodes.push_back(std::move(node));
  }

  int add_value(const Tensor& tensor) {
    trace_.values.push_back({tensor.shape(), tensor.dtype()});
    return static_cast<int>(trace_.values.size()) - 1;
  }

  std::map<const void*, std::vector<int>> views_;  // storage -> its value, then its reshapes
  std::map<const void*, std::string> names_;
  std::vector<Tensor> alive_;
  bool recording_ = false;
};

bool same_window(const ops::cpu::Window2D& a, const ops::cpu::Window2D& b) {
  return a.in_h == b.in_h && a.in_w == b.in_w && a.in_c == b.in_c && a.kernel_h == b.kernel_h &&
         a.kernel_w == b.kernel_w && a.out_h == b.out_h && a.out_w == b.out_w &&
         a.out_c == b.out_c && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && a.pad_top == b.pad_top &&
         a.pad_left == b.pad_left && a.pad_bottom == b.pad_bottom && a.pad_right == b.pad_right;
}

}  // namespace

bool TracedNode::operator==(const TracedNode& other) const {
  return kind == other.kind && op == other.op && name == other.name && inputs == other.inputs &&
         outputs == other.outputs && member == other.member && activation == other.activation &&
         ints == other.ints && reals == other.reals && flag_a == other.flag_a &&
         flag_b == other.flag_b && same_window(window, other.window);
}

Trace trace(const std::function<NamedTensors(const NamedTensors&)>& fn, const NamedTensors& inputs,
            const std::vector<std::pair<std::string, Tensor>>& names) {
  Tracer tracer(names);
  for (const auto& [name, tensor] : inputs) tracer.trace_.inputs[name] = tracer.define(tensor);
  NamedTensors outputs;
  {
    ops::NoGradGuard no_grad;
    ops::KernelObserverGuard observing(tracer);
    outputs = fn(inputs);
  }
  for (const auto& [name, tensor] : outputs) {
    if (!tensor.defined())
      throw InvalidArgumentError("export: output '" + name + "' is an undefined tensor");
    tracer.trace_.outputs[name] = tracer.resolve(tensor);
  }
  return std::move(tracer.trace_);
}

}  // namespace est::serving
