// CRC-32 (the gzip/zlib polynomial) of a checkpoint's tensor and blob bytes.
//
// HDF5 checksums its metadata but not raw data, so this is what detects a flipped bit in a
// variable. The value equals zlib's crc32() (and Python's zlib.crc32), so any tool can check a
// file independently. ISA-L computes it when available, zlib otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace est::checkpoint {

uint32_t crc32(const void* data, size_t bytes, uint32_t previous = 0);

}  // namespace est::checkpoint
