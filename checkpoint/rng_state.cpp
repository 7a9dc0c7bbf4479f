// Little-endian encoding of generator states.
#include "checkpoint/rng_state.h"

#include <fmt/format.h>

#include "ops/error.h"

namespace est::checkpoint {

std::string encode_generator_state(const std::array<uint64_t, 4>& state) {
  std::string bytes;
  for (uint64_t word : state)
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((word >> (8 * i)) & 0xff);
  return bytes;
}

std::array<uint64_t, 4> decode_generator_state(std::string_view bytes, const std::string& what) {
  if (bytes.size() != 32)
    throw DataLossError(
        fmt::format("{}: expected 32 bytes (four 64-bit words), got {}", what, bytes.size()));
  std::array<uint64_t, 4> state{};
  for (size_t w = 0; w < 4; ++w)
    for (size_t i = 0; i < 8; ++i)
      state[w] |= uint64_t{static_cast<unsigned char>(bytes[w * 8 + i])} << (8 * i);
  return state;
}

}  // namespace est::checkpoint
