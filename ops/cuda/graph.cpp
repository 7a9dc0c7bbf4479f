// Graph: capture of the compute stream into a private allocator pool, instantiation, replay,
// and the per-device capturing flags that host copies and synchronize() check.
#include "ops/cuda/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <iterator>

#include "ops/cuda/allocator.h"
#include "ops/cuda/check.h"
#include "ops/cuda/runtime.h"
#include "ops/cuda/softmax_loss.h"
#include "ops/cuda/xoshiro_jump.h"

namespace est::ops::cuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<Graph*> g_capturing[kMaxDevices];  // the graph capturing each device, if any
std::mutex g_capture_state[kMaxDevices];       // held while a capture begins or ends

cudaStream_t compute(int device) { return static_cast<cudaStream_t>(compute_stream(device)); }

void set_capturing(int device, Graph* graph) {
  if (device >= 0 && device < kMaxDevices) g_capturing[device].store(graph);
}

}  // namespace

bool capturing(int device) { return capturing_graph(device) != nullptr; }

Graph* capturing_graph(int device) {
  return device >= 0 && device < kMaxDevices ? g_capturing[device].load() : nullptr;
}

std::unique_lock<std::mutex> lock_capture_state(int device) {
  if (device < 0 || device >= kMaxDevices) return {};
  return std::unique_lock<std::mutex>(g_capture_state[device]);
}

void throw_host_access_in_capture(int device, std::string_view what, const Tensor& tensor) {
  throw FailedPreconditionError(fmt::format(
      "{} of a {} {} tensor inside a CUDA graph capture of /gpu:{}: the host part of the op "
      "would run once at capture and never at replay. A captured step must not read device "
      "values on the host (Tensor::item, Tensor::to(cpu), a loss or metric read) nor copy host "
      "data in: read outputs after replay(), and copy each new batch into the graph's static "
      "input tensors (on the device) before replay()",
      what, dtype_name(tensor.dtype()), shape_str(tensor.shape()), device));
}

Graph::Graph(int device) : device_(device) { require_device(device); }

Graph::~Graph() {
  if (capturing_) abort_capture();
  try {
    DeviceGuard guard(device_);
    if (exec_ != nullptr) {
      EST_CUDA_CHECK(cudaStreamSynchronize(compute(device_)));  // replays still in flight
      EST_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
    }
    for (const RandomSource& source : random_) EST_CUDA_CHECK(cudaFree(source.state));
    if (graph_ != nullptr) EST_CUDA_CHECK(cudaGraphDestroy(static_cast<cudaGraph_t>(graph_)));
    if (pool_ != 0) release_private_pool(device_, pool_);
  } catch (const std::exception& e) {
    fmt::print(stderr, "est: destroying a CUDA graph of /gpu:{}: {}\n", device_, e.what());
  }
}

void Graph::begin_capture() {
  if (exec_ != nullptr || capturing_)
    throw FailedPreconditionError(fmt::format(
        "this CUDA graph of /gpu:{} was already captured; make a new Graph to capture again",
        device_));
  if (capturing(device_))
    throw FailedPreconditionError(fmt::format(
        "/gpu:{} is already being captured by another CUDA graph; end that capture first",
        device_));
  synchronize(device_);  // eager work queued before the capture is not part of it
  pool_ = create_private_pool(device_);
  begin_private_pool(device_, pool_);
  DeviceGuard guard(device_);
  std::unique_lock lock = lock_capture_state(device_);
  const cudaError_t error = cudaStreamBeginCapture(compute(device_), cudaStreamCaptureModeRelaxed);
  if (error != cudaSuccess) {
    end_private_pool(device_);
    cudaGetLastError();
    EST_CUDA_CHECK(error);
  }
  capturing_ = true;
  set_capturing(device_, this);
}

void Graph::end_capture() {
  if (!capturing_)
    throw FailedPreconditionError(
        fmt::format("end_capture on a CUDA graph of /gpu:{} that is not capturing", device_));
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  std::unique_lock lock = lock_capture_state(device_);
  const cudaError_t error = cudaStreamEndCapture(compute(device_), &graph);
  capturing_ = false;
  set_capturing(device_, nullptr);
  lock.unlock();
  end_private_pool(device_);
  if (error != cudaSuccess) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw InternalError(fmt::format(
        "the CUDA graph capture of /gpu:{} failed: cudaStreamEndCapture: {} ({}); an op in the "
        "captured region made a call that capture forbids (a synchronisation, a query of "
        "captured work, work on another stream left unjoined)",
        device_, cudaGetErrorName(error), cudaGetErrorString(error)));
  }
  graph_ = graph;
  size_t count = 0;
  EST_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  nodes_ = static_cast<int64_t>(count);
  cudaGraphExec_t exec = nullptr;
  EST_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  exec_ = exec;
}

void Graph::abort_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  {
    std::unique_lock lock = lock_capture_state(device_);
    set_capturing(device_, nullptr);
    cudaStreamEndCapture(compute(device_), &graph);  // invalidated or not: discarded
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  if (previous >= 0) cudaSetDevice(previous);
  try {
    end_private_pool(device_);
    release_private_pool(device_, pool_);
  } catch (...) {
  }
  pool_ = 0;
}

void Graph::fail_capture(std::exception_ptr error) {
  abort_capture();
  try {
    std::rethrow_exception(error);
  } catch (const InternalError& e) {
    const std::string_view message = e.what();
    if (message.find("cudaErrorStreamCapture") == std::string_view::npos) throw;
    throw FailedPreconditionError(fmt::format(
        "an op made a CUDA call that graph capture forbids on /gpu:{} (its kernel synchronised "
        "the host or copied to host memory, e.g. to read a check back); the capture was "
        "abandoned. Make that op asynchronous, or run this step eagerly. {}",
        device_, message));
  }
}

void Graph::replay() {
  if (exec_ == nullptr)
    throw FailedPreconditionError(fmt::format(
        "replay of a CUDA graph of /gpu:{} that was not captured: capture() it first", device_));
  DeviceGuard guard(device_);
  for (RandomSource& source : random_) {  // each generator's state now, for the graph's kernels
    const std::array<uint64_t, 4> state = source.generator->state();
    write_generator_state(source.state, state.data(), compute_stream(device_));
  }
  EST_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), compute(device_)));
  for (RandomSource& source : random_) {  // where the eager steps would leave it
    std::array<uint64_t, 4> state = source.generator->state();
    xoshiro_jump(xoshiro_jump_table(), state.data(), source.draws);
    source.generator->set_state(state);
  }
}

CapturedDraws Graph::draw(Generator& generator, uint64_t count) {
  if (!capturing_)
    throw FailedPreconditionError(
        fmt::format("Graph::draw on a CUDA graph of /gpu:{} that is not capturing", device_));
  auto it = std::find_if(random_.begin(), random_.end(),
                         [&](const RandomSource& s) { return s.generator == &generator; });
  if (it == random_.end()) {
    void* state = nullptr;
    DeviceGuard guard(device_);
    EST_CUDA_CHECK(cudaMalloc(&state, 4 * sizeof(uint64_t)));  // allowed: relaxed capture
    random_.push_back({&generator, state, 0});
    it = std::prev(random_.end());
  }
  const CapturedDraws where{static_cast<const uint64_t*>(it->state), it->draws};
  it->draws += count;  // the generator itself moves at replay: the capture runs nothing
  return where;
}

int64_t Graph::pool_bytes() const { return pool_ == 0 ? 0 : private_pool_bytes(device_, pool_); }

}  // namespace est::ops::cuda
