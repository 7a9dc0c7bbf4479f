// CUDA graph capture and replay of a device's work, for launch-bound training steps: the
// steady-state step is recorded once (cudaStreamBeginCapture on the device's compute stream,
// cudaStreamEndCapture, cudaGraphInstantiate) and then launched as one graph (cudaGraphLaunch),
// which costs one launch instead of one per kernel.
//
// Shaped after PyTorch's torch.cuda.CUDAGraph (aten/src/ATen/cuda/CUDAGraph.cpp): a graph owns a
// private pool of the device allocator (block_cache.h) that serves every allocation made while
// it captures, so the addresses baked into the graph stay reserved for it across replays and
// are released with it. Inputs are static: the tensors the captured work read must stay alive,
// and new values are copied into them before replay(); outputs are the tensors the captured
// work wrote, updated in place by each replay.
//
// Capture is relaxed (cudaStreamCaptureModeRelaxed, so the pool may still call cudaMalloc) and
// covers the compute stream only: copies between the host and the device and synchronize()
// refuse to run on a capturing device with a FailedPreconditionError naming the copy (the host
// part of such an op would run once at capture and never at replay). Only the capturing thread
// allocates from the graph's pool (BlockCache routes by stream and thread); other threads of
// the process (prefetch_to_device's worker) keep allocating from the shared cache and must not
// make their streams wait on the capturing compute stream (that would join them to the
// capture): lock_capture_state() lets them check and wait atomically.
//
// Random numbers: a kernel that draws from a Generator inside a capture (dropout's mask) must
// not bake the generator's state into its arguments, or every replay would draw the same
// numbers. It asks draw() instead for a device slot and an offset: replay() writes each such
// generator's current state into its slot before the graph runs and then advances the generator
// by all the draws of the graph, so replays draw what the same eager steps would (after
// PyTorch's CUDA graph RNG, which passes the philox offset the same way). The header names no
// CUDA type.
#pragma once

#include <cstdint>
#include <exception>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/random.h"
#include "ops/tensor.h"

namespace est::ops::cuda {

// Where a captured kernel reads its generator state: the four words at `state` (device memory,
// written before each replay) advanced by `offset` draws.
struct CapturedDraws {
  const uint64_t* state = nullptr;
  uint64_t offset = 0;
};

class Graph {
 public:
  explicit Graph(int device = 0);
  ~Graph();  // waits for its replays, then destroys the graph and releases its pool
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts recording the device's compute stream (after waiting for the device's queued
  // work). FailedPreconditionError when this graph was already captured or the device is
  // already capturing.
  void begin_capture();
  // Stops recording and instantiates the graph. Throws when the capture was invalidated (an op
  // made a call capture forbids), naming the CUDA error.
  void end_capture();
  // Abandons a capture after an exception in the captured region; the graph stays empty.
  void abort_capture() noexcept;
  // abort_capture(), then rethrows `error`; a CUDA error that capture caused (an op's kernel
  // synchronised the host or copied to pageable host memory) becomes a FailedPreconditionError
  // that says so and keeps the call, file and line of the op.
  [[noreturn]] void fail_capture(std::exception_ptr error);
  // Launches the graph on the compute stream; the host returns at once. Generators the graph
  // draws from (draw()) advance as the eager steps would have advanced them.
  void replay();
  // While capturing: the slot and offset for a kernel drawing `count` numbers from `generator`
  // (which must outlive the graph). The generator stays where it is (the capture runs nothing):
  // each replay advances it, so replays draw what the same eager steps would, in order.
  CapturedDraws draw(Generator& generator, uint64_t count);

  bool captured() const { return exec_ != nullptr; }
  int device() const { return device_; }
  int64_t nodes() const { return nodes_; }  // kernels and copies recorded
  int64_t pool_bytes() const;               // memory its private pool holds

 private:
  int device_;
  uint64_t pool_ = 0;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  bool capturing_ = false;
  int64_t nodes_ = 0;
  struct RandomSource {
    Generator* generator;
    void* state;     // 4 words on the device
    uint64_t draws;  // drawn by the captured kernels, per replay
  };
  std::vector<RandomSource> random_;
};

// Records `region()` into `graph`; an exception inside abandons the capture and propagates.
template <class F>
void capture(Graph& graph, F&& region) {
  graph.begin_capture();
  try {
    std::forward<F>(region)();
  } catch (...) {
    graph.fail_capture(std::current_exception());
  }
  graph.end_capture();
}

// Whether `device`'s compute stream is being captured now, and by which graph (null: none).
bool capturing(int device);
Graph* capturing_graph(int device);
// Holds off the beginning and end of captures of `device` while held: a thread other than the
// capturing one checks capturing() and queues its stream waits under it.
std::unique_lock<std::mutex> lock_capture_state(int device);
// Throws FailedPreconditionError when `device` is capturing: `what` ("a copy from the host to
// /gpu:0") of `tensor` would run on the host once at capture, never at replay.
void throw_host_access_in_capture(int device, std::string_view what, const Tensor& tensor);
inline void check_no_host_access(int device, std::string_view what, const Tensor& tensor) {
  if (capturing(device)) throw_host_access_in_capture(device, what, tensor);
}

}  // namespace est::ops::cuda
