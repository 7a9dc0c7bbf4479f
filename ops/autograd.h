// Autograd: a tape of gradient functions recorded as ops run (define-by-run).
//
// Every differentiable op computes its result, then calls record() with its inputs and one
// gradient function. The result's GradNode points at the inputs, so the graph is the chain of
// nodes reachable from the loss; backward() is a topological sort and a reverse loop.
// Gradient functions capture what they need from the forward pass explicitly (saved tensors are
// detached, so no node keeps itself alive through its own output).
// An op that reads rows of its first input (gather along axis 0) also records that input's
// gradient as IndexedSlices (TF's IndexedSlices), which row_sparse_gradients() hands on without
// ever materialising the dense gradient of an embedding table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/indexed_slices.h"
#include "ops/tensor.h"

namespace est::ops {

// Which inputs of a node need a gradient; a gradient function may skip the others (returning
// an undefined Tensor in their place), which saves e.g. conv backward-data on the first layer.
struct NeedsGrad {
  std::vector<bool> flags;
  bool operator[](size_t i) const { return i < flags.size() && flags[i]; }
};

// Returns one gradient per input, in input order, each of the input's shape (or undefined).
using BackwardFn =
    std::function<std::vector<Tensor>(const Tensor& grad_output, const NeedsGrad& needs)>;
// The gradient of input 0 as rows of it (an op that reads rows of its first input).
using RowSparseBackwardFn = std::function<IndexedSlices(const Tensor& grad_output)>;

struct GradNode {
  std::string name;            // the op, for error messages and profiles
  std::vector<Tensor> inputs;  // the tensors the op read (only their autograd links are used)
  BackwardFn backward;
  // Set by ops that read rows of input 0: its gradient as slices. backward() then asks
  // `backward` only for the other inputs (needs[0] false) when input 0 is a source that
  // row_sparse_gradients() hands on as slices.
  RowSparseBackwardFn row_sparse_backward;
};

// Whether ops record gradients on this thread. Off inside NoGradGuard (eval, predict,
// optimizer updates).
bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and some input requires a gradient.
bool needs_recording(std::initializer_list<const Tensor*> inputs);

// Attaches a node to `output` when needs_recording(inputs); returns `output` either way.
Tensor record(Tensor output, const char* name, std::vector<Tensor> inputs, BackwardFn backward);

// Accumulates d(loss)/d(leaf) into leaf.grad() for every leaf that requires a gradient.
// `loss` must be a scalar unless `grad_output` (same shape as loss) is given.
void backward(const Tensor& loss, const Tensor& grad_output = {});

// d(loss)/d(source) for each source, like tf.gradients; a source the loss does not depend on
// gets a zero tensor. Nothing is accumulated into grad().
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& sources);
// The same, calling on_ready(i, gradient) as soon as source i's gradient is complete, during the
// backward pass (a leaf's after the last op that reads it), so that a caller can start using it
// (a multi-worker all-reduce) while the pass goes on. Every source is reported exactly once, in
// an order that depends only on the graph; zero gradients of sources the loss does not depend
// on come last.
using GradientReady = std::function<void(size_t source, const Tensor& gradient)>;
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& sources,
                              const GradientReady& on_ready);

// A source's gradient from row_sparse_gradients(): dense, or row-sparse (`rows`, TF's
// IndexedSlices) when every op on the path that reached the source read rows of it directly
// (gather along axis 0: embedding lookups, the linear model's sparse sums). A source that is
// also read densely (a regulariser, a matmul) gets the dense sum of both.
struct SourceGradient {
  Tensor dense;
  IndexedSlices rows;
  bool row_sparse() const { return rows.defined(); }
  bool defined() const { return dense.defined() || rows.defined(); }
  Tensor to_dense() const { return row_sparse() ? ops::to_dense(rows) : dense; }
};
using SourceGradientReady = std::function<void(size_t source, const SourceGradient& gradient)>;
// gradients() that keeps row-sparse gradients of leaves row-sparse; the rest is the same (zeros
// for a source the loss does not depend on, on_ready as gradients' on_ready).
std::vector<SourceGradient> row_sparse_gradients(const Tensor& loss,
                                                 const std::vector<Tensor>& sources,
                                                 const SourceGradientReady& on_ready = {});

}  // namespace est::ops
