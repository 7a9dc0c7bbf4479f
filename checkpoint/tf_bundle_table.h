// Reading the index of a TensorFlow V2 checkpoint (`<prefix>.index`): a LevelDB-style sorted
// table, as TensorFlow's tsl/lib/io/table_format.txt, block.cc, format.cc and table.cc define it.
//
//   [data block 1] ... [data block N] [metaindex block] [index block] [footer: 48 bytes]
//
// The footer holds the handles (varint64 offset, varint64 size) of the metaindex and index
// blocks, zero padding, and the 64-bit magic number 0xdb4775248b80fb57. Each block is followed
// by a 5-byte trailer: its compression type (0 raw, 1 snappy) and the masked CRC32C of the
// stored (possibly compressed) bytes plus that type byte. A block holds entries with
// prefix-compressed keys, then the restart offsets (uint32 each) and their count (uint32).
// The index block maps each data block's last key to its handle.
//
// An index is small (one entry per tensor), so it is read whole and every entry decoded at
// once. Every inconsistency is a DataLossError naming the file and what is wrong.
//
// build_table() writes such a table as TensorFlow's TableBuilder does (table_builder.cc,
// block_builder.cc): keys prefix-compressed against the previous key with a restart point
// every 16 keys, a data block closed once it reaches the block size, no compression (what
// BundleWriter asks for), an empty metaindex block, an index block keyed by short separators.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace est::checkpoint::tf_table {

inline constexpr uint64_t kTableMagicNumber = 0xdb4775248b80fb57ull;
inline constexpr size_t kFooterSize = 48;       // two handles padded to 40 bytes, then the magic
inline constexpr size_t kBlockTrailerSize = 5;  // type byte + masked CRC32C
inline constexpr uint8_t kRawBlock = 0;
inline constexpr uint8_t kSnappyBlock = 1;
inline constexpr size_t kDefaultBlockSize = 262144;  // table::Options::block_size
inline constexpr int kBlockRestartInterval = 16;     // table::Options::block_restart_interval

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;  // without the trailer
};

using Entry = std::pair<std::string, std::string>;  // key, value

// A little-endian uint32 (restart offsets, CRCs, the magic number's halves).
uint32_t decode_fixed32(const char* bytes);
void put_fixed32(std::string& out, uint32_t value);
// LevelDB's and protobuf's varint: 7 bits a byte, low bits first.
void put_varint64(std::string& out, uint64_t value);

// Varint decoding as protobuf and LevelDB write it; false when the input ends first or the
// value does not fit.
bool read_varint64(std::string_view& input, uint64_t* value);
bool read_varint32(std::string_view& input, uint32_t* value);

// The entries of one block's contents (trailer already removed and checked), in stored order.
// `where` names the file and block in errors.
std::vector<Entry> decode_block(std::string_view contents, const std::string& where);

// The block's contents, its trailer's CRC checked and snappy blocks uncompressed.
std::string read_block(std::string_view file, const BlockHandle& handle, const std::string& path,
                       std::string_view what);

// Every key/value of the table in `file` (the bytes of the index read from `path`), in key
// order; keys are checked to increase strictly.
std::vector<Entry> read_table(std::string_view file, const std::string& path);

// Reads the file at `path` and decodes it: NotFoundError when it cannot be opened.
std::vector<Entry> read_table_file(const std::string& path);

// The bytes of a table holding `entries`, whose keys must increase strictly (bytewise);
// InvalidArgumentError naming the first key out of order otherwise. `block_size` is the size
// at which a data block is closed (smaller values only in tests, to make several blocks).
std::string build_table(const std::vector<Entry>& entries, size_t block_size = kDefaultBlockSize);

}  // namespace est::checkpoint::tf_table
