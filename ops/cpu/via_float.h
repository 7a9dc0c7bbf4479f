// The reference kernels' bfloat16 path: a kernel written for float32/float64 runs on bfloat16
// tensors by widening every bfloat16 argument to float32 (exact), running the float32 kernel,
// and rounding each bfloat16 output once from its float32 result (round to nearest even), as
// TensorFlow's CPU kernels for DT_BFLOAT16 compute through float. The reference is the
// semantics other backends are tested against, so it pays the copies for simplicity; oneDNN
// (ops/onednn) and CUDA (ops/cuda) have native bfloat16 kernels where it matters.
//
// via_float<cpu::kernel> has the kernel's signature; the CUDA backend uses the same adapter with
// its own cast kernel (via_float<cuda::kernel, cuda::cast>) for the kernels it has no native
// bfloat16 path for. Arguments are adapted by kind:
//   const Tensor&                a bfloat16 tensor is replaced by its float32 widening;
//   Tensor& / Tensor*            outputs (or in-out state): a bfloat16 one is replaced by a
//                                float32 copy, which is rounded back into it after the kernel;
//                                an undefined one the kernel defines (pooling's workspace) is
//                                kept as the kernel made it;
//   const std::vector<Tensor>&   each bfloat16 element widened;
//   anything else                passed through.
// When no argument is bfloat16 the kernel is called directly (the float32 path pays a dtype
// check per tensor argument, nothing else).
#pragma once

#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/tensor.h"

namespace est::ops::cpu {

void cast(const Tensor& x, Tensor& out);  // elementwise_kernels.cpp

namespace via_float_detail {

using CastFn = void (*)(const Tensor&, Tensor&);

inline bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == DType::kBF16; }

template <CastFn Cast>
Tensor widened(const Tensor& t) {
  if (!is_bf16(t)) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::kF32, t.device());
  Cast(t, wide);
  return wide;
}

template <class A>
bool has_bf16(const A& arg) {
  using D = std::remove_cvref_t<A>;
  if constexpr (std::is_same_v<D, Tensor>)
    return is_bf16(arg);
  else if constexpr (std::is_same_v<D, Tensor*>)
    return arg != nullptr && is_bf16(*arg);
  else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    for (const Tensor& t : arg)
      if (is_bf16(t)) return true;
    return false;
  } else
    return false;
}

// One adapted argument: get() is what the float kernel receives, finish() writes outputs back.
template <class A, CastFn Cast>
struct Adapted {
  A value;
  A get() { return static_cast<A>(value); }
  void finish() {}
};
template <CastFn Cast>
struct Adapted<const Tensor&, Cast> {
  Tensor wide;
  explicit Adapted(const Tensor& t) : wide(widened<Cast>(t)) {}
  const Tensor& get() { return wide; }
  void finish() {}
};
template <CastFn Cast>
struct Adapted<Tensor&, Cast> {
  Tensor& original;
  Tensor wide;
  explicit Adapted(Tensor& t) : original(t), wide(widened<Cast>(t)) {}
  Tensor& get() { return wide; }
  void finish() {
    if (is_bf16(original))
      Cast(wide, original);
    else if (!original.defined())
      original = wide;  // state the kernel made (pooling's workspace) is kept as it made it
  }
};
template <CastFn Cast>
struct Adapted<Tensor*, Cast> {
  Tensor* original;
  Tensor wide;
  explicit Adapted(Tensor* t) : original(t), wide(t ? widened<Cast>(*t) : Tensor()) {}
  Tensor* get() { return original ? &wide : nullptr; }
  void finish() {
    if (original == nullptr) return;
    if (is_bf16(*original))
      Cast(wide, *original);
    else if (!original->defined())
      *original = wide;  // state the kernel made (conv2d's kernel_for_backward)
  }
};
template <CastFn Cast>
struct Adapted<const std::vector<Tensor>&, Cast> {
  std::vector<Tensor> wide;
  explicit Adapted(const std::vector<Tensor>& ts) {
    wide.reserve(ts.size());
    for (const Tensor& t : ts) wide.push_back(widened<Cast>(t));
  }
  const std::vector<Tensor>& get() { return wide; }
  void finish() {}
};

template <auto Kernel, CastFn Cast, class Fn = decltype(Kernel)>
struct ViaFloat;
template <auto Kernel, CastFn Cast, class... A>
struct ViaFloat<Kernel, Cast, void (*)(A...)> {
  static void run(A... args) {
    if (!(has_bf16(args) || ...)) {
      Kernel(static_cast<A>(args)...);
      return;
    }
    std::tuple<Adapted<A, Cast>...> adapted{Adapted<A, Cast>{static_cast<A>(args)}...};
    std::apply([](auto&... a) { Kernel(a.get()...); }, adapted);
    std::apply([](auto&... a) { (a.finish(), ...); }, adapted);
  }
};

}  // namespace via_float_detail

// The kernel `Kernel` (a function pointer) with its bfloat16 arguments computed in float32,
// widened and rounded by `Cast` (the backend's cast kernel: cpu::cast, or cuda::cast, which
// runs on the tensors' device and stream).
template <auto Kernel, via_float_detail::CastFn Cast = &cast>
inline constexpr auto via_float = &via_float_detail::ViaFloat<Kernel, Cast>::run;

}  // namespace est::ops::cpu
