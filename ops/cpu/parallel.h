// Splitting loops over the intra-op threads (OpenMP, the runtime oneDNN uses on Debian), and the
// work below which splitting does not pay. Waking a team and meeting it at the closing barrier
// costs microseconds on idle cores (spinning threads) and far more where the cores are shared,
// so small work runs on the calling thread: the thresholds are where `threads_bench --grain`
// found one thread and every core equal (bench/README.md has the figures).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "ops/backend.h"

namespace est::ops::cpu {

// Elements at most which an elementwise loop runs inline: an add of 2^14 floats took as long on
// one thread as split over two (0.95-1.02), of 2^15 split 0.75-0.78 of one (2 cores, spinning
// OpenMP threads).
inline constexpr int64_t kElementwiseGrain = int64_t{1} << 14;

// Makes OpenMP (and so oneDNN and Eigen) use one thread on the calling thread for the scope's
// lifetime when `serial`; restores the thread's count after. oneDNN kernels take it for work
// below their threshold (ops/onednn/kernels.h). Inside a parallel region it sets the count of
// that thread's task only, which is what a oneDNN primitive built there must see: one thread,
// the number it will run on.
class SerialScope {
 public:
  explicit SerialScope(bool serial) {
    if (!serial || omp_get_max_threads() <= 1) return;
    previous_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (previous_ > 0) omp_set_num_threads(previous_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int previous_ = 0;  // the count to restore; 0: nothing changed
};

// The number of parts work on n items splits into where the split shapes the result (the
// partial sums of a reduction, the blocks of a product): each at least `grain` items (but one)
// and at most kFixedParts, chosen from the problem size only, never from the thread count, so
// that partial results combined in a fixed order give the same bits however many threads ran
// them (DESIGN: results never depend on the thread count, which the thread governor changes at
// any moment). parallel_for then spreads the parts over the threads there are.
inline constexpr int64_t kFixedParts = 16;
inline int64_t fixed_parts(int64_t n, int64_t grain) {
  return std::clamp<int64_t>((n + grain - 1) / std::max<int64_t>(grain, 1), 1, kFixedParts);
}

// Calls fn(begin, end) on disjoint chunks covering [0, n); runs inline when n is below `grain`
// or only one thread is allowed, so small tensors pay no threading cost. The thread count is
// ops::active_threads(): the configured one (ops/backend.h) unless this thread set its own,
// fewer while the cores are contended.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  const int threads = active_threads();
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks;
    int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

}  // namespace est::ops::cpu
