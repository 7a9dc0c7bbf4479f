// CRC32C (Castagnoli) through Intel ISA-L, and TFRecord's masking of it.
//
// TFRecord frames store a "masked" CRC so that a CRC computed over data that itself contains
// CRCs does not degenerate: rotate right by 15 bits and add a constant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace est::data {

// The standard CRC32C: crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// Continues a CRC over more bytes: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc(uint32_t masked) {
  uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace est::data
