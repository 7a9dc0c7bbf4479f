// Which kernels run an op, and on how many threads.
//
// Backends. The Eigen reference kernels always exist; oneDNN (CPU) and CUDA are optional at
// build time, and CUDA needs a GPU at run time. Kernels are looked up in the kernel registry
// (ops/registry.h: op x device x backend). On the CPU, each op kind with a kernel on both CPU
// backends runs on the backend that a small table (ops/backend_table.h, measured by
// bench/op_backend_bench) prefers for that kind, falling back to the reference where oneDNN is
// not built or has no kernel for the case (another dtype than float32, an empty tensor); work
// large enough to time runs on the backend calibrated for its shape on this machine instead
// (ops/kernel_calibration.h; EST_KERNEL_CALIBRATION=0 keeps the table everywhere). A
// BackendGuard forces one CPU backend for every kind on the current thread: the op harness runs
// every case once per backend this way. The registry counts which backend each kind ran on
// (dispatch_count), so tests can see the table in use.
//
// Threads. CPU kernels split their loops over OpenMP threads. The rule for a process's thread
// count, first match wins:
//   1. EST_NUM_THREADS=<n>: n threads.
//   2. OMP_NUM_THREADS=<n>: n threads (OpenMP's own variable, honoured as OpenMP would).
//   3. max(1, cores / EST_LOCAL_PROCESSES): the cores this process may run on (its affinity mask
//      and cgroup CPU quota) divided among the processes that share the host. A launcher that
//      starts N workers on one machine sets EST_LOCAL_PROCESSES=N (default 1) in each.
// Bad values (not a positive integer) are an InvalidArgumentError naming the variable.
// Why not simply use every core, always: OpenMP threads spin while they wait for work (libgomp
// spins up to 300,000 iterations before sleeping, and reads OMP_WAIT_POLICY and GOMP_SPINCOUNT
// once, when it is loaded, so no library call can shorten the wait afterwards), so two processes
// that each run a team of every core take turns at a spin-wait and train 10-100x slower, and one
// beside a busy neighbour takes the core the neighbour needs. What a library can do is size its
// teams: a team of one thread never waits for another. So, by default, the count above is a
// maximum: the process's thread governor (ops/thread_governor.h) watches how long its threads
// wait for a core and how idle its CPUs are, sheds threads while the cores are contended (by
// other est processes that know nothing of this one, or by any other program) and takes them
// back when the cores are idle again. EST_ADAPTIVE_THREADS=0 keeps the count fixed. Results do
// not depend on the count: reductions are split into parts fixed by the problem's size
// (ops/cpu/parallel.h's fixed_parts), so the governor's choice changes the speed, never the
// bits (tests/estimator/thread_count_training_test.cpp). Dividing the cores with
// EST_LOCAL_PROCESSES, as a launcher does, still avoids the first contended moments; its children
// also get GOMP_SPINCOUNT=10000, which costs nothing on idle cores and shortens each wait beside
// a busy neighbour, where OMP_WAIT_POLICY=passive would make every small parallel op pay a
// thread wake-up. thread_environment_for_children gives the variables. Work too small to pay
// for a team runs on the calling thread whatever the count (ops/cpu/parallel.h).
// configure_threads() applies the rule to the process (every thread that runs a kernel picks it
// up, unless it called set_num_threads itself) and logs a warning when the host is
// oversubscribed; the first kernel, num_threads() or a strategy calls it, so users rarely do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace est::ops {

enum class Backend : uint8_t { kReference, kOneDnn, kCuda };

std::string_view backend_name(Backend backend);  // "reference", "onednn", "cuda"
// Whether this build has the backend (CUDA: compiled with nvcc, whatever the machine has).
bool backend_built(Backend backend);
// Whether the backend can run here: built, and for CUDA at least one GPU (any error of the CUDA
// runtime while counting them, no driver included, counts as no GPU).
bool backend_available(Backend backend);
// Why backend_available(backend) is false ("" when it is true), for skips and errors.
std::string backend_unavailable_reason(Backend backend);
std::vector<Backend> available_cpu_backends();  // kReference first

// CPU op kinds that have a kernel on more than one backend. Forward and backward are one kind
// where backward reads state only its own backend's forward makes (pooling's workspace).
enum class OpKind : uint8_t {
  kConvForward,          // conv2d with its fused bias and activation
  kConvBackwardData,     // conv2d's input gradient
  kConvBackwardWeights,  // conv2d's kernel and bias gradients
  kMatmul,               // matmul and linear (fused bias and activation), and their gradients
  kPooling,              // max and average pooling, forward and backward
  kEltwise,              // relu, sigmoid, tanh, exp, log, sqrt, abs, forward and backward
  kSoftmax,              // softmax and log_softmax over the last axis, forward and backward
  kBatchNorm,            // batch norm training and inference, forward and backward
};
inline constexpr int kNumOpKinds = 8;
std::string_view op_kind_name(OpKind kind);  // "conv_forward", "matmul", ...
std::vector<OpKind> all_op_kinds();

// The backend the table prefers for `kind`, among those this build has.
Backend preferred_cpu_backend(OpKind kind);
// The backend an op of `kind` uses on this thread: the guard's when one is active, else the
// preferred one.
Backend cpu_backend_for(OpKind kind);
// The backend a BackendGuard forces on this thread, or nullopt (each kind follows the table).
// Code that runs ops on other threads for this one (replica threads) passes it on.
std::optional<Backend> forced_cpu_backend();

class BackendGuard {
 public:
  explicit BackendGuard(Backend cpu_backend);  // throws if that backend is not built in
  ~BackendGuard();
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  int previous_;  // the guard before this one (-1: none)
};

// Kernels of each kind run on each CPU backend by this process (all threads), counted by the
// registry when the kernel has run (after any fallback to the reference).
void count_dispatch(OpKind kind, Backend backend);
int64_t dispatch_count(OpKind kind, Backend backend);

// Counters of the kernel caches (oneDNN primitives and reorders). A steady-state training
// step creates nothing: `created` stays constant while `hits` grows.
struct KernelCacheStats {
  int64_t created = 0;
  int64_t hits = 0;
};
KernelCacheStats kernel_cache_stats();

// ---- Threads (the rule is in the comment at the top) ----

// How a process's intra-op thread count was chosen.
struct ThreadPlan {
  int threads = 1;              // OpenMP threads per kernel
  int cores = 1;                // cores this process may run on
  int local_processes = 1;      // processes sharing those cores (EST_LOCAL_PROCESSES)
  std::string rule;             // e.g. "EST_NUM_THREADS=3" or "4 cores / 2 local processes"
  bool explicit_count = false;  // EST_NUM_THREADS or OMP_NUM_THREADS chose `threads`
  bool oversubscribed = false;  // threads x local processes > cores
  bool short_spin = false;      // OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT <= 100000
  bool adaptive = true;         // the governor may shrink the count (EST_ADAPTIVE_THREADS != 0)
};

// Looks up an environment variable: its value, or nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

// The rule applied to an environment and a core count (pure: tests pass their own lookup).
ThreadPlan plan_threads(const EnvLookup& env, int cores);
// The cores this process may run on: its CPU affinity mask, capped by a cgroup CPU quota.
int available_cores();
// Applies plan_threads(real environment, available_cores()) to this process once, logs the
// plan, and warns when the host is oversubscribed; later calls return the same plan.
const ThreadPlan& configure_threads();
// The threads of a process that knows `local_processes` processes share the host (a strategy
// told so, from TF_CONFIG say): configure_threads().threads when a variable chose the count,
// else cores / max(local_processes, EST_LOCAL_PROCESSES), at least one.
int threads_for_local_processes(int local_processes);
// The environment variables a launcher sets for each of `local_processes` children on one host
// so that they divide its cores and spin briefly: EST_LOCAL_PROCESSES, and GOMP_SPINCOUNT=10000
// unless this process's environment sets OMP_WAIT_POLICY or GOMP_SPINCOUNT (children inherit
// those).
std::vector<std::pair<std::string, std::string>> thread_environment_for_children(
    int local_processes);

// Intra-op threads for CPU kernels (OpenMP) that the calling thread asks for: the configured count
// unless this thread set its own. A strategy with several CPU replicas gives each replica thread
// its share (configure_threads().threads / replicas).
int num_threads();
void set_num_threads(int threads);
// The threads the calling thread's kernels use now: num_threads(), scaled down by the governor
// while the cores are contended (the same as num_threads() when adaptation is off). Kernels
// split their work into this many chunks at most.
int active_threads();
// Gives the calling thread its active count as OpenMP's (oneDNN's) thread count; the dispatchers
// call it before every CPU kernel (a clock read when nothing changed).
void apply_thread_count();

}  // namespace est::ops
