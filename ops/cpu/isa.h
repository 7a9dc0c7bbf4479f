// Run-time choice of the instruction set for the hot CPU loops.
//
// The libraries are compiled for the baseline x86-64 ISA (SSE2) so that they run on any x86-64
// CPU; `-Dnative=true` is for local builds only. Loops whose speed depends on the vector width
// (the fused conv kernel gradient's register-blocked product, the elementwise and optimizer
// loops of the float32 fast paths) are marked EST_MULTIVERSION: GCC compiles them three times,
// for AVX-512, AVX2 and the baseline, inlines everything they call into each copy (`flatten`,
// so the helpers are compiled for that ISA too), and an ifunc picks the copy for the CPU when
// the program loads. oneDNN JIT-compiles its kernels for the CPU it finds, so it needs nothing.
// Out-of-line copies of inline functions stay baseline code, so nothing built for a wider ISA
// leaks into code that runs on an older CPU (as per-file -mavx2 flags would through the linker's
// choice among duplicate inline functions).
#pragma once

#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define EST_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define EST_MULTIVERSION
#endif

namespace est::ops::cpu {

// The copy EST_MULTIVERSION loops run on this CPU: "avx512f", "avx2" or "baseline" (or
// "native" where the build has no clones).
std::string_view multiversion_isa();

// Whether this CPU has AVX-512 with byte/word, vector-length and doubleword/quadword
// instructions (oneDNN's avx512_core), from which oneDNN 2.6 has JIT bfloat16 matmul and
// convolution kernels; without it oneDNN would run its slow reference bfloat16 kernels, so the
// oneDNN backend declines bfloat16 and the registry falls back to the reference.
bool has_avx512_core();

}  // namespace est::ops::cpu
