// The dtype switch of the kernels that only move elements (transpose, concat, slice, gather,
// broadcast_to, ...): they need an element's size, not its type, so one unsigned integer type
// per size serves every dtype. Shared by ops/cpu and ops/cuda (plain C++17, read by nvcc too).
#pragma once

#include <cstddef>
#include <cstdint>

namespace est::ops {

// Calls fn(U{}) with U the unsigned integer type of `element_size` bytes (1, 2, 4 or 8) and
// returns true; any other size calls nothing and returns false.
template <class Fn>
bool dispatch_element_bytes(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1:
      fn(uint8_t{});
      return true;
    case 2:
      fn(uint16_t{});
      return true;
    case 4:
      fn(uint32_t{});
      return true;
    case 8:
      fn(uint64_t{});
      return true;
    default:
      return false;
  }
}

}  // namespace est::ops
