// Graph: capture of the compute stream into a private allocator pool, instantiation, replay,
// and the per-device capturing flags that host copies and synchronize() check.
#include "ops/cuda/graph.h"

#include <fmt/format.h>

#include <atomic>

#include "ops/cuda/allocator.h"
#include "ops/cuda/check.h"
#include "ops/cuda/runtime.h"

namespace est::ops::cuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<int> g_capturing[kMaxDevices];  // how many graphs capture each device (0 or 1)

cudaStream_t compute(int device) { return static_cast<cudaStream_t>(compute_stream(device)); }

void set_capturing(int device, bool on) {
  if (device >= 0 && device < kMaxDevices) g_capturing[device].store(on ? 1 : 0);
}

}  // namespace

bool capturing(int device) {
  return device >= 0 && device < kMaxDevices && g_capturing[device].load() != 0;
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
  const cudaError_t error = cudaStreamBeginCapture(compute(device_), cudaStreamCaptureModeRelaxed);
  if (error != cudaSuccess) {
    end_private_pool(device_);
    cudaGetLastError();
    EST_CUDA_CHECK(error);
  }
  capturing_ = true;
  set_capturing(device_, true);
}

void Graph::end_capture() {
  if (!capturing_)
    throw FailedPreconditionError(
        fmt::format("end_capture on a CUDA graph of /gpu:{} that is not capturing", device_));
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  const cudaError_t error = cudaStreamEndCapture(compute(device_), &graph);
  capturing_ = false;
  set_capturing(device_, false);
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
  set_capturing(device_, false);
  cudaGraph_t graph = nullptr;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  cudaStreamEndCapture(compute(device_), &graph);  // invalidated or not: discarded
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
  EST_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), compute(device_)));
}

int64_t Graph::pool_bytes() const { return pool_ == 0 ? 0 : private_pool_bytes(device_, pool_); }

}  // namespace est::ops::cuda
