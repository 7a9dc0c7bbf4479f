// Byte encodings of RNG states for checkpoint blobs: ops::Generator's four 64-bit words,
// little-endian, so a restored run draws the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace est::checkpoint {

std::string encode_generator_state(const std::array<uint64_t, 4>& state);
// DataLossError naming `what` when the bytes are not 32 bytes long.
std::array<uint64_t, 4> decode_generator_state(std::string_view bytes,
                                               const std::string& what = "RNG state");

}  // namespace est::checkpoint
