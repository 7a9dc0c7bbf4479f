// CRC-32 through ISA-L (several GB/s faster) or zlib; both give the same value.
#include "checkpoint/checksum.h"

#include <zlib.h>

#include <algorithm>

#if EST_HAVE_ISAL
#include <isa-l/crc.h>
#endif

namespace est::checkpoint {

uint32_t crc32(const void* data, size_t bytes, uint32_t previous) {
#if EST_HAVE_ISAL
  return crc32_gzip_refl(previous, static_cast<const unsigned char*>(data), bytes);
#else
  // zlib takes the length as uInt: feed it in pieces below 4 GiB.
  const auto* at = static_cast<const Bytef*>(data);
  uLong crc = previous;
  while (bytes > 0) {
    size_t piece = std::min<size_t>(bytes, size_t{1} << 30);
    crc = ::crc32(crc, at, static_cast<uInt>(piece));
    at += piece;
    bytes -= piece;
  }
  return static_cast<uint32_t>(crc);
#endif
}

}  // namespace est::checkpoint
