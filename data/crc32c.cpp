// ISA-L's crc32_iscsi keeps the CRC register un-inverted: seed with ~0 and invert the result.
#include "data/crc32c.h"

#include <isa-l/crc.h>

namespace est::data {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t state = ~crc;
  // crc32_iscsi takes an int length; feed very large buffers in pieces.
  while (size > 0) {
    int piece = static_cast<int>(size > (1u << 30) ? (1u << 30) : size);
    state = crc32_iscsi(const_cast<unsigned char*>(bytes), piece, state);
    bytes += piece;
    size -= static_cast<size_t>(piece);
  }
  return ~state;
}

uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

}  // namespace est::data
