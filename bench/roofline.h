// This machine's roofline, measured in the bench's own run: single-precision GEMM GFLOP/s (the
// GEMM est's kernels use: oneDNN's dnnl_sgemm when the build has oneDNN, else Eigen) and memory
// bandwidth (a STREAM-like triad over arrays far beyond the last-level cache), and the tutorial
// CNN's FLOPs and bytes per step, so that a bench can print how close a step comes to the bound.
#pragma once

#include <cstdint>

namespace bench {

struct Roofline {
  double gflops = 0;      // best sgemm rate, 1e9 FLOP/s
  double gbytes_s = 0;    // best triad bandwidth, 1e9 bytes/s (3 arrays x 4 bytes per element)
  const char* gemm = "";  // "onednn_sgemm" or "eigen"
};

// Square n x n sgemm and a triad over `triad_elements` floats per array, best of `reps` each, on
// `threads` OpenMP threads.
Roofline measure_roofline(int threads, int64_t n = 1024, int64_t triad_elements = 32 << 20,
                          int reps = 10);

// The tutorial CNN (examples/cnn_model.h) at `batch`: FLOPs and bytes of one training step
// (forward, backward, SGD) or one inference step (forward only); see roofline.cpp for the counts.
struct StepCost {
  double flops = 0;
  double bytes = 0;
};
StepCost tutorial_cnn_cost(int64_t batch, bool training);

// The step's roofline bound in seconds, max(FLOPs / sgemm rate, bytes / bandwidth), over the
// measured seconds per step: 1 means the step runs at the machine's bound.
double roofline_fraction(const Roofline& roofline, const StepCost& cost, double step_seconds);
// Which term sets that bound: "flops" (sgemm) or "bytes" (bandwidth).
const char* roofline_limit(const Roofline& roofline, const StepCost& cost);

}  // namespace bench
