// The tape: recording nodes and the reverse pass over them.
#include "ops/autograd.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ops/math.h"

namespace est::ops {
namespace {
thread_local bool t_grad_enabled = true;
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool needs_recording(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor record(Tensor output, const char* name, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!t_grad_enabled) return output;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return output;
  auto node = std::make_shared<GradNode>();
  node->name = name;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.set_grad_node(std::move(node));
  return output;
}

namespace {

// Nodes reachable from `root`, in reverse topological order (root first).
std::vector<GradNode*> topological_order(GradNode* root) {
  std::vector<GradNode*> post_order;
  std::unordered_set<GradNode*> visited{root};
  std::vector<std::pair<GradNode*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const Tensor& input = node->inputs[next++];
      GradNode* child = input.defined() ? input.grad_node().get() : nullptr;
      if (child != nullptr && visited.insert(child).second) stack.push_back({child, 0});
    } else {
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  return {post_order.rbegin(), post_order.rend()};
}

void add_into(Tensor& slot, const Tensor& grad) {
  if (!grad.defined()) return;
  slot = slot.defined() ? add(slot, grad) : grad;
}

// A leaf's gradient so far: slices while only row reads reached it, dense once anything else
// did (the slices densified first, so the sum is formed in the order of the dense pass).
void add_into(SourceGradient& slot, const Tensor& grad) {
  if (!grad.defined()) return;
  if (slot.rows.defined()) {
    slot.dense = add(to_dense(slot.rows), grad);
    slot.rows = {};
    return;
  }
  add_into(slot.dense, grad);
}

void add_into(SourceGradient& slot, const IndexedSlices& rows) {
  if (slot.dense.defined())
    slot.dense = add(slot.dense, to_dense(rows));
  else
    slot.rows = slot.rows.defined() ? concat_slices({slot.rows, rows}) : rows;
}

// The reverse pass. Gradients of intermediate tensors are keyed by their node (every
// non-leaf tensor has its own), those of leaves by their implementation. `on_node` sees each
// node's complete gradient before it is propagated; `on_leaf` each leaf's as soon as it is
// complete: after the last node that reads the leaf (the rest, if any, at the end). With
// `row_sparse`, a leaf read by row-reading ops (GradNode::row_sparse_backward) gets slices.
template <class OnNode, class OnLeaf>
void run_backward(const Tensor& root, const Tensor& seed, bool row_sparse, OnNode&& on_node,
                  OnLeaf&& on_leaf) {
  std::unordered_map<const TensorImpl*, std::pair<Tensor, SourceGradient>> leaves;  // leaf, grad
  if (!root.grad_node()) {
    on_leaf(root, SourceGradient{seed, {}});
    return;
  }
  NoGradGuard no_grad;  // gradient functions compute plain values
  std::vector<GradNode*> order = topological_order(root.grad_node().get());
  // The position of the last node that reads each leaf: its gradient is complete after it.
  std::unordered_map<const TensorImpl*, size_t> last_reader;
  for (size_t k = 0; k < order.size(); ++k)
    for (const Tensor& input : order[k]->inputs)
      if (input.defined() && !input.grad_node() && input.requires_grad())
        last_reader[input.impl()] = k;
  std::vector<const TensorImpl*> finished;
  std::unordered_map<GradNode*, Tensor> grads{{root.grad_node().get(), seed}};
  for (size_t k = 0; k < order.size(); ++k) {
    GradNode* node = order[k];
    auto found = grads.find(node);
    if (found == grads.end()) continue;
    Tensor grad = std::move(found->second);
    grads.erase(found);
    on_node(node, grad);
    NeedsGrad needs;
    needs.flags.reserve(node->inputs.size());
    for (const Tensor& input : node->inputs)
      needs.flags.push_back(input.defined() && input.requires_grad());
    // Input 0 read by rows and a leaf: its gradient as slices, the others as usual.
    const bool rows_of_leaf =
        row_sparse && node->row_sparse_backward && needs[0] && !node->inputs[0].grad_node();
    if (rows_of_leaf) {
      const Tensor& input = node->inputs[0];
      auto& [leaf, leaf_grad] = leaves[input.impl()];
      leaf = input;
      add_into(leaf_grad, node->row_sparse_backward(grad));
      needs.flags[0] = false;
    }
    std::vector<Tensor> input_grads = node->backward(grad, needs);
    if (input_grads.size() != node->inputs.size())
      throw InternalError("gradient of " + node->name + " returned " +
                          std::to_string(input_grads.size()) + " gradients for " +
                          std::to_string(node->inputs.size()) + " inputs");
    finished.clear();
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Tensor& input = node->inputs[i];
      if (input.defined() && !input.grad_node() && input.requires_grad() &&
          last_reader[input.impl()] == k)
        finished.push_back(input.impl());
      if (!needs[i] || !input_grads[i].defined()) continue;
      if (input_grads[i].shape() != input.shape())
        throw InternalError("gradient of " + node->name + " for input " + std::to_string(i) +
                            " has shape " + shape_str(input_grads[i].shape()) + ", expected " +
                            shape_str(input.shape()));
      if (GradNode* child = input.grad_node().get()) {
        add_into(grads[child], input_grads[i]);
      } else {
        auto& [leaf, leaf_grad] = leaves[input.impl()];
        leaf = input;
        add_into(leaf_grad, input_grads[i]);
      }
    }
    for (const TensorImpl* impl : finished) {
      auto entry = leaves.find(impl);
      if (entry == leaves.end()) continue;  // no gradient reached it
      on_leaf(entry->second.first, entry->second.second);
      leaves.erase(entry);
    }
  }
  for (auto& [impl, entry] : leaves) on_leaf(entry.first, entry.second);
}

Tensor make_seed(const Tensor& loss, const Tensor& grad_output) {
  if (!loss.defined()) throw InvalidArgumentError("backward: the loss tensor is undefined");
  if (grad_output.defined()) {
    if (grad_output.shape() != loss.shape())
      throw InvalidArgumentError("backward: grad_output has shape " +
                                 shape_str(grad_output.shape()) + " but the loss has shape " +
                                 shape_str(loss.shape()));
    return grad_output;
  }
  if (loss.numel() != 1)
    throw InvalidArgumentError("backward: the loss must be a scalar, got shape " +
                               shape_str(loss.shape()) +
                               "; reduce it (e.g. with mean) or pass grad_output");
  return Tensor::ones(loss.shape(), loss.dtype(), loss.device());
}

}  // namespace

void backward(const Tensor& loss, const Tensor& grad_output) {
  Tensor seed = make_seed(loss, grad_output);
  if (!loss.requires_grad())
    throw InvalidArgumentError(
        "backward: the loss does not depend on any tensor that requires a gradient (were the "
        "variables created, and is this outside a NoGradGuard?)");
  run_backward(
      loss, seed, false, [](GradNode*, const Tensor&) {},
      [](const Tensor& leaf, const SourceGradient& gradient) {
        if (!leaf.requires_grad()) return;
        const Tensor& grad = gradient.dense;
        Tensor current = leaf.grad();
        Tensor mutable_leaf = leaf;
        mutable_leaf.set_grad(current.defined() ? add(current, grad) : grad);
      });
}

std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& sources) {
  return gradients(loss, sources, {});
}

namespace {

// Both gradients() and row_sparse_gradients(): each source's gradient reported once.
std::vector<SourceGradient> source_gradients(const Tensor& loss, const std::vector<Tensor>& sources,
                                             bool row_sparse, const SourceGradientReady& on_ready) {
  Tensor seed = make_seed(loss, {});
  std::vector<SourceGradient> result(sources.size());
  std::unordered_map<const void*, std::vector<size_t>> wanted;  // node or leaf impl -> indices
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!sources[i].defined())
      throw InvalidArgumentError("gradients: source " + std::to_string(i) + " is undefined");
    const void* key = sources[i].grad_node()
                          ? static_cast<const void*>(sources[i].grad_node().get())
                          : static_cast<const void*>(sources[i].impl());
    wanted[key].push_back(i);
  }
  auto store = [&](const void* key, const SourceGradient& grad) {
    auto it = wanted.find(key);
    if (it == wanted.end()) return;
    for (size_t i : it->second) {
      if (result[i].defined()) continue;  // reported once
      result[i] = grad;
      if (on_ready) on_ready(i, grad);
    }
  };
  if (loss.requires_grad())
    run_backward(
        loss, seed, row_sparse,
        [&](GradNode* node, const Tensor& grad) {
          store(node, SourceGradient{grad, {}});
        },
        [&](const Tensor& leaf, const SourceGradient& grad) { store(leaf.impl(), grad); });
  for (size_t i = 0; i < sources.size(); ++i)
    if (!result[i].defined()) {
      result[i].dense = Tensor::zeros(sources[i].shape(), sources[i].dtype(), sources[i].device());
      if (on_ready) on_ready(i, result[i]);
    }
  return result;
}

}  // namespace

std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& sources,
                              const GradientReady& on_ready) {
  std::vector<SourceGradient> all =
      source_gradients(loss, sources, false,
                       on_ready ? SourceGradientReady([&](size_t i, const SourceGradient& grad) {
                         on_ready(i, grad.dense);
                       })
                                : SourceGradientReady());
  std::vector<Tensor> result;
  result.reserve(all.size());
  for (SourceGradient& grad : all) result.push_back(std::move(grad.dense));
  return result;
}

std::vector<SourceGradient> row_sparse_gradients(const Tensor& loss,
                                                 const std::vector<Tensor>& sources,
                                                 const SourceGradientReady& on_ready) {
  return source_gradients(loss, sources, true, on_ready);
}

}  // namespace est::ops
