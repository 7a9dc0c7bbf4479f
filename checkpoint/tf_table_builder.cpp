// Writing the LevelDB-style table of a TensorFlow checkpoint index; see tf_bundle_table.h.
// Written after TensorFlow's tsl/lib/io/table_builder.cc (data blocks closed at the block size,
// index entries keyed by the shortest separator between two blocks and the short successor of
// the last key), block_builder.cc (prefix-compressed keys, restart points) and format.cc (block
// handles, the 5-byte trailer, the 48-byte footer).
#include <fmt/format.h>

#include "checkpoint/tf_bundle_table.h"
#include "data/crc32c.h"
#include "ops/error.h"

namespace est::checkpoint::tf_table {
namespace {

// BlockBuilder: entries `shared, non_shared, value_size` (varint32 each), the key's new bytes,
// the value; every `restart_interval` entries the key is stored whole and its offset recorded.
class BlockBuilder {
 public:
  explicit BlockBuilder(int restart_interval) : restart_interval_(restart_interval) {}

  void add(std::string_view key, std::string_view value) {
    size_t shared = 0;
    if (counter_ < restart_interval_) {
      const size_t limit = std::min(last_key_.size(), key.size());
      while (shared < limit && last_key_[shared] == key[shared]) ++shared;
    } else {
      restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
      counter_ = 0;
    }
    put_varint64(buffer_, shared);
    put_varint64(buffer_, key.size() - shared);
    put_varint64(buffer_, value.size());
    buffer_.append(key.substr(shared));
    buffer_.append(value);
    last_key_.assign(key);
    ++counter_;
  }

  // The block's bytes once the restart array is appended.
  size_t size_estimate() const { return buffer_.size() + 4 * restarts_.size() + 4; }
  bool empty() const { return buffer_.empty(); }

  std::string finish() {
    std::string block = std::move(buffer_);
    for (uint32_t restart : restarts_) put_fixed32(block, restart);
    put_fixed32(block, static_cast<uint32_t>(restarts_.size()));
    buffer_.clear();
    restarts_.assign(1, 0);
    counter_ = 0;
    last_key_.clear();
    return block;
  }

 private:
  int restart_interval_;
  std::string buffer_;
  std::vector<uint32_t> restarts_{0};
  int counter_ = 0;
  std::string last_key_;
};

// A key k with start <= k < limit, as short as the bytes allow (the bytewise comparator's
// FindShortestSeparator); start itself when no shorter one exists.
std::string shortest_separator(const std::string& start, std::string_view limit) {
  size_t diff = 0;
  const size_t common = std::min(start.size(), limit.size());
  while (diff < common && start[diff] == limit[diff]) ++diff;
  if (diff >= common) return start;  // one is a prefix of the other
  const auto byte = static_cast<uint8_t>(start[diff]);
  if (byte == 0xff || byte + 1 >= static_cast<uint8_t>(limit[diff])) return start;
  std::string separator = start.substr(0, diff + 1);
  separator[diff] = static_cast<char>(byte + 1);
  return separator;
}

// A short key >= key (FindShortSuccessor): the first byte that is not 0xff, incremented.
std::string short_successor(const std::string& key) {
  for (size_t i = 0; i < key.size(); ++i)
    if (static_cast<uint8_t>(key[i]) != 0xff) {
      std::string successor = key.substr(0, i + 1);
      successor[i] = static_cast<char>(static_cast<uint8_t>(key[i]) + 1);
      return successor;
    }
  return key;
}

// Appends a raw block and its trailer (type 0, masked CRC32C of the bytes and the type);
// returns its handle.
std::string append_raw_block(std::string& file, const std::string& contents) {
  std::string handle;
  put_varint64(handle, file.size());
  put_varint64(handle, contents.size());
  file += contents;
  file.push_back(static_cast<char>(kRawBlock));
  const uint32_t crc =
      data::crc32c(file.data() + file.size() - contents.size() - 1, contents.size() + 1);
  put_fixed32(file, data::mask_crc(crc));
  return handle;
}

}  // namespace

void put_fixed32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put_varint64(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

std::string build_table(const std::vector<Entry>& entries, size_t block_size) {
  std::string file;
  BlockBuilder data(kBlockRestartInterval);
  BlockBuilder index(1);  // table_builder.cc: every index entry is a restart point
  std::string last_key;
  std::string pending_handle;  // of the data block just written, until the next key is known
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, value] = entries[i];
    if (i > 0 && key <= last_key)
      throw InvalidArgumentError(fmt::format(
          "Building a TensorFlow checkpoint index: key \"{}\" does not sort after \"{}\"; keys "
          "must be unique and added in bytewise order",
          key, last_key));
    if (!pending_handle.empty()) {
      index.add(shortest_separator(last_key, key), pending_handle);
      pending_handle.clear();
    }
    data.add(key, value);
    last_key = key;
    if (data.size_estimate() >= block_size) pending_handle = append_raw_block(file, data.finish());
  }
  if (!data.empty()) pending_handle = append_raw_block(file, data.finish());
  if (!pending_handle.empty()) index.add(short_successor(last_key), pending_handle);
  const std::string metaindex_handle = append_raw_block(file, BlockBuilder(1).finish());
  const std::string index_handle = append_raw_block(file, index.finish());
  // Footer: the two handles padded to 40 bytes, then the magic number, low half first.
  std::string footer = metaindex_handle + index_handle;
  footer.resize(kFooterSize - 8, '\0');
  put_fixed32(footer, static_cast<uint32_t>(kTableMagicNumber & 0xffffffffu));
  put_fixed32(footer, static_cast<uint32_t>(kTableMagicNumber >> 32));
  return file + footer;
}

}  // namespace est::checkpoint::tf_table
