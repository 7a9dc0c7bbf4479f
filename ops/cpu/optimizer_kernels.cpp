// Reference kernels of the fused optimizer updates (OpId::kApplySgd ... kApplyRmsprop): one
// pass per variable over its elements (OpenMP chunks), every slot updated in the same pass.
//
// They reproduce, bit for bit, what the optimizers' former composite ops computed (one
// elementwise kernel per operation, each result rounded to the dtype): the same operations in
// the same order, the scalars rounded to the dtype as ops::mul(tensor, double) rounds them.
// That requires no contraction of a*b+c into a fused multiply-add, which GCC does by default
// where the ISA has FMA (-Dnative=true, and the AVX2/AVX-512 copies of EST_MULTIVERSION); this
// file is compiled with -ffp-contract=off (ops/meson.build), and -fno-math-errno, without which
// sqrt does not vectorize. The float32 loops are
// EST_MULTIVERSION over restrict pointers so that they vectorize like the elementwise kernels.
// SGD calls the add_scaled kernel itself, whose FMA the former path also had.
// The formulas are TF1's (tensorflow/core/kernels/training_ops.cc, training/adam.py).
#include <cmath>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"

#define EST_INLINE inline __attribute__((always_inline))

namespace est::ops::cpu {
namespace {

// The loops, one per rule, over [begin, end); each intermediate rounded to T.
template <class T>
EST_INLINE void momentum_loop(T* __restrict var, T* __restrict accum, const T* __restrict g, T mu,
                              T lr, T lr_mu, bool nesterov, int64_t begin, int64_t end) {
  if (nesterov) {
    for (int64_t j = begin; j < end; ++j) {
      const T a = static_cast<T>(static_cast<T>(accum[j] * mu) + g[j]);
      accum[j] = a;
      const T step = static_cast<T>(static_cast<T>(g[j] * lr) + static_cast<T>(a * lr_mu));
      var[j] = static_cast<T>(var[j] - step);
    }
  } else {
    for (int64_t j = begin; j < end; ++j) {
      const T a = static_cast<T>(static_cast<T>(accum[j] * mu) + g[j]);
      accum[j] = a;
      var[j] = static_cast<T>(var[j] - static_cast<T>(a * lr));
    }
  }
}

template <class T>
EST_INLINE void adam_loop(T* __restrict var, T* __restrict m, T* __restrict v,
                          const T* __restrict g, T b1, T one_minus_b1, T b2, T one_minus_b2,
                          T alpha, T eps, int64_t begin, int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
    const T gj = g[j];
    const T mj = static_cast<T>(static_cast<T>(m[j] * b1) + static_cast<T>(gj * one_minus_b1));
    const T g2 = static_cast<T>(gj * gj);
    const T vj = static_cast<T>(static_cast<T>(v[j] * b2) + static_cast<T>(g2 * one_minus_b2));
    m[j] = mj;
    v[j] = vj;
    const T denominator = static_cast<T>(static_cast<T>(std::sqrt(vj)) + eps);
    const T step = static_cast<T>(static_cast<T>(mj * alpha) / denominator);
    var[j] = static_cast<T>(var[j] - step);
  }
}

template <class T>
EST_INLINE void adagrad_loop(T* __restrict var, T* __restrict accum, const T* __restrict g, T lr,
                             int64_t begin, int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
    const T gj = g[j];
    const T a = static_cast<T>(accum[j] + static_cast<T>(gj * gj));
    accum[j] = a;
    const T step = static_cast<T>(static_cast<T>(gj * lr) / static_cast<T>(std::sqrt(a)));
    var[j] = static_cast<T>(var[j] - step);
  }
}

template <class T>
EST_INLINE void rmsprop_loop(T* __restrict var, T* __restrict ms, T* __restrict mg,
                             T* __restrict mom, const T* __restrict g, T decay, T one_minus_decay,
                             T mu, T lr, T eps, int64_t begin, int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
    const T gj = g[j];
    const T g2 = static_cast<T>(gj * gj);
    const T msj =
        static_cast<T>(static_cast<T>(ms[j] * decay) + static_cast<T>(g2 * one_minus_decay));
    ms[j] = msj;
    T denominator = msj;
    if (mg != nullptr) {
      const T mgj =
          static_cast<T>(static_cast<T>(mg[j] * decay) + static_cast<T>(gj * one_minus_decay));
      mg[j] = mgj;
      denominator = static_cast<T>(msj - static_cast<T>(mgj * mgj));
    }
    const T root = static_cast<T>(std::sqrt(static_cast<T>(denominator + eps)));
    const T scaled = static_cast<T>(static_cast<T>(gj * lr) / root);
    const T momj = static_cast<T>(static_cast<T>(mom[j] * mu) + scaled);
    mom[j] = momj;
    var[j] = static_cast<T>(var[j] - momj);
  }
}

// float32: compiled for AVX-512, AVX2 and the baseline, picked at run time.
EST_MULTIVERSION void momentum_f32(float* var, float* accum, const float* g, float mu, float lr,
                                   float lr_mu, bool nesterov, int64_t begin, int64_t end) {
  momentum_loop(var, accum, g, mu, lr, lr_mu, nesterov, begin, end);
}
EST_MULTIVERSION void adam_f32(float* var, float* m, float* v, const float* g, float b1,
                               float one_minus_b1, float b2, float one_minus_b2, float alpha,
                               float eps, int64_t begin, int64_t end) {
  adam_loop(var, m, v, g, b1, one_minus_b1, b2, one_minus_b2, alpha, eps, begin, end);
}
EST_MULTIVERSION void adagrad_f32(float* var, float* accum, const float* g, float lr, int64_t begin,
                                  int64_t end) {
  adagrad_loop(var, accum, g, lr, begin, end);
}
EST_MULTIVERSION void rmsprop_f32(float* var, float* ms, float* mg, float* mom, const float* g,
                                  float decay, float one_minus_decay, float mu, float lr, float eps,
                                  int64_t begin, int64_t end) {
  if (mg == nullptr)  // two loops, so that the plain one vectorizes without the centered branch
    rmsprop_loop<float>(var, ms, nullptr, mom, g, decay, one_minus_decay, mu, lr, eps, begin, end);
  else
    rmsprop_loop(var, ms, mg, mom, g, decay, one_minus_decay, mu, lr, eps, begin, end);
}

// Runs fn(T{}, i) for each variable i of a fused update in the variables' floating dtype.
template <class Fn>
void for_each_variable(const std::vector<Tensor>& variables, Fn&& fn) {
  for (size_t i = 0; i < variables.size(); ++i) {
    if (variables[i].dtype() == DType::kF64)
      fn(double{}, i);
    else
      fn(float{}, i);
  }
}

template <class Range>
void over_elements(int64_t n, Range&& range) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) { range(begin, end); });
}

}  // namespace

void apply_sgd(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
               double learning_rate) {
  for (size_t i = 0; i < variables.size(); ++i)
    add_scaled(variables[i], gradients[i], -learning_rate);
}

void apply_momentum(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                    std::vector<Tensor>& accumulators, double learning_rate, double momentum,
                    bool nesterov) {
  for_each_variable(variables, [&](auto tag, size_t i) {
    using T = decltype(tag);
    T* var = variables[i].data<T>();
    T* accum = accumulators[i].data<T>();
    const T* g = gradients[i].data<T>();
    const T mu = static_cast<T>(momentum), lr = static_cast<T>(learning_rate);
    const T lr_mu = static_cast<T>(learning_rate * momentum);
    over_elements(variables[i].numel(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        momentum_f32(var, accum, g, mu, lr, lr_mu, nesterov, begin, end);
      else
        momentum_loop(var, accum, g, mu, lr, lr_mu, nesterov, begin, end);
    });
  });
}

void apply_adam(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                std::vector<Tensor>& m, std::vector<Tensor>& v, double step_size, double beta1,
                double beta2, double epsilon) {
  for_each_variable(variables, [&](auto tag, size_t i) {
    using T = decltype(tag);
    T* var = variables[i].data<T>();
    T* mi = m[i].data<T>();
    T* vi = v[i].data<T>();
    const T* g = gradients[i].data<T>();
    const T b1 = static_cast<T>(beta1), one_minus_b1 = static_cast<T>(1.0 - beta1);
    const T b2 = static_cast<T>(beta2), one_minus_b2 = static_cast<T>(1.0 - beta2);
    const T alpha = static_cast<T>(step_size), eps = static_cast<T>(epsilon);
    over_elements(variables[i].numel(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        adam_f32(var, mi, vi, g, b1, one_minus_b1, b2, one_minus_b2, alpha, eps, begin, end);
      else
        adam_loop(var, mi, vi, g, b1, one_minus_b1, b2, one_minus_b2, alpha, eps, begin, end);
    });
  });
}

void apply_adagrad(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& accumulators, double learning_rate) {
  for_each_variable(variables, [&](auto tag, size_t i) {
    using T = decltype(tag);
    T* var = variables[i].data<T>();
    T* accum = accumulators[i].data<T>();
    const T* g = gradients[i].data<T>();
    const T lr = static_cast<T>(learning_rate);
    over_elements(variables[i].numel(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        adagrad_f32(var, accum, g, lr, begin, end);
      else
        adagrad_loop(var, accum, g, lr, begin, end);
    });
  });
}

void apply_rmsprop(std::vector<Tensor>& variables, const std::vector<Tensor>& gradients,
                   std::vector<Tensor>& mean_square, std::vector<Tensor>& mean_gradient,
                   std::vector<Tensor>& moment, const RmspropParams& params) {
  for_each_variable(variables, [&](auto tag, size_t i) {
    using T = decltype(tag);
    T* var = variables[i].data<T>();
    T* ms = mean_square[i].data<T>();
    T* mg = params.centered ? mean_gradient[i].data<T>() : nullptr;
    T* mom = moment[i].data<T>();
    const T* g = gradients[i].data<T>();
    const T decay = static_cast<T>(params.decay);
    const T one_minus_decay = static_cast<T>(1.0 - params.decay);
    const T mu = static_cast<T>(params.momentum), lr = static_cast<T>(params.learning_rate);
    const T eps = static_cast<T>(params.epsilon);
    over_elements(variables[i].numel(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        rmsprop_f32(var, ms, mg, mom, g, decay, one_minus_decay, mu, lr, eps, begin, end);
      else
        rmsprop_loop(var, ms, mg, mom, g, decay, one_minus_decay, mu, lr, eps, begin, end);
    });
  });
}

}  // namespace est::ops::cpu
