// Which EST_MULTIVERSION copy runs here (the ifunc resolvers make the same test).
#include "ops/cpu/isa.h"

namespace est::ops::cpu {

std::string_view multiversion_isa() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  return "baseline";
#else
  return "native";
#endif
}

bool has_avx512_core() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

}  // namespace est::ops::cpu
