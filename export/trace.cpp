// The tracer: a KernelObserver that turns each kernel call into a TracedNode (see trace.h).
#include "export/trace.h"

#include <tuple>
#include <utility>

#include "ops/autograd.h"
#include "ops/op_list.h"
#include "ops/registry.h"

namespace est::serving {
namespace {

using ops::OpId;

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
#define EST_CASE(ID, ...) \
  case OpId::ID:          \
    return written_by<OpId::ID>(args);
    EST_REGISTRY_OPS(EST_CASE)
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
      case OpId::kPool2D: {
        const auto& [input, window, kind, training, output, workspace] =
            args_of<OpId::kPool2D>(args);
        node.window = window;
        node.member = static_cast<int>(kind);
        node.inputs = {resolve(input)};
        outputs = {&output};
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
        if (!has_onnx_form(id)) {
          node.kind = NodeKind::kUnsupported;
          outputs = written_tensors(id, args);
          break;
        }
        switch (id) {
#define EST_CASE(ID, ...)                    \
  case OpId::ID:                             \
    take_all<OpId::ID>(node, outputs, args); \
    break;
          EST_REGISTRY_OPS(EST_CASE)
#undef EST_CASE
        }
        break;
    }
    for (const Tensor* output : outputs) node.outputs.push_back(define(*output));
    trace_.nodes.push_back(std::move(node));
  }

  // What a traced kernel's argument becomes in its node, by the argument's type: tensors read are
  // inputs, tensors written are outputs, the others attributes (the first bool is flag_a, a
  // second flag_b). A kernel parameter of another type fails to compile here (the catch-all)
  // rather than being left out of the export.
  struct Taken {
    TracedNode& node;
    std::vector<const Tensor*>& outputs;
    int flags = 0;
  };
  void take(Taken& t, const Tensor& x) { t.node.inputs.push_back(resolve(x)); }
  void take(Taken& t, const std::vector<Tensor>& xs) {
    for (const Tensor& x : xs) t.node.inputs.push_back(resolve(x));
  }
  void take(Taken& t, Tensor& out) { t.outputs.push_back(&out); }
  void take(Taken& t, Tensor* out) {
    if (out != nullptr) t.outputs.push_back(out);
  }
  void take(Taken& t, std::vector<Tensor>& in_place) {
    for (Tensor& out : in_place) t.outputs.push_back(&out);
  }
  void take(Taken& t, ops::BinaryOp op) { t.node.member = static_cast<int>(op); }
  void take(Taken& t, ops::CompareOp op) { t.node.member = static_cast<int>(op); }
  void take(Taken& t, ops::UnaryOp op) { t.node.member = static_cast<int>(op); }
  void take(Taken& t, ops::ReduceOp op) { t.node.member = static_cast<int>(op); }
  void take(Taken& t, ops::PoolKind kind) { t.node.member = static_cast<int>(kind); }
  void take(Taken& t, ops::Activation activation) { t.node.activation = activation; }
  void take(Taken& t, const ops::UnaryParams& params) {
    t.node.reals.insert(t.node.reals.end(), {params.a, params.b});
  }
  void take(Taken& t, double value) { t.node.reals.push_back(value); }
  void take(Taken& t, int value) { t.node.ints.push_back(value); }
  void take(Taken& t, const std::vector<int>& values) {
    t.node.ints.insert(t.node.ints.end(), values.begin(), values.end());
  }
  void take(Taken& t, const std::vector<int64_t>& values) {
    t.node.ints.insert(t.node.ints.end(), values.begin(), values.end());
  }
  void take(Taken& t, bool flag) { (t.flags++ == 0 ? t.node.flag_a : t.node.flag_b) = flag; }
  void take(Taken& t, const ops::MatmulDims& dims) {
    t.node.flag_a = dims.transpose_a;
    t.node.flag_b = dims.transpose_b;
  }
  void take(Taken& t, const ops::cpu::Window2D& window) { t.node.window = window; }
  // State no export holds: a random generator, an optimizer's hyperparameters.
  void take(Taken&, ops::Generator&) {}
  void take(Taken&, const ops::RmspropParams&) {}
  template <class T>
  void take(Taken&, const T&) {
    static_assert(sizeof(T) == 0,
                  "export/trace.cpp: a kernel parameter type (ops/op_list.h) the tracer does not "
                  "record; add a take() overload for it");
  }

  // Records kernel `id`'s arguments by their types (take).
  template <OpId id>
  void take_all(TracedNode& node, std::vector<const Tensor*>& outputs, const void* args) {
    Taken taken{node, outputs};
    std::apply([&](auto&&... arg) { (take(taken, arg), ...); }, args_of<id>(args));
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
