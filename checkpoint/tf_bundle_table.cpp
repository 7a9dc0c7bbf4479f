// The LevelDB-style table of a TensorFlow checkpoint index; see tf_bundle_table.h. Written
// after TensorFlow's tsl/lib/io/table_format.txt, format.cc (footer, block trailer), block.cc
// (entries and restarts) and table.cc (index block, then data blocks).
#include "checkpoint/tf_bundle_table.h"

#include <snappy.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "data/crc32c.h"
#include "ops/error.h"

namespace est::checkpoint::tf_table {
namespace {

[[noreturn]] void corrupt(const std::string& path, std::string_view what) {
  throw DataLossError(fmt::format(
      "TensorFlow checkpoint index {}: {}. The file is truncated, damaged or not a TensorFlow "
      "V2 checkpoint index; copy it again from where the checkpoint was written",
      path, what));
}

BlockHandle read_handle(std::string_view& input, const std::string& path, std::string_view what) {
  BlockHandle handle;
  if (!read_varint64(input, &handle.offset) || !read_varint64(input, &handle.size))
    corrupt(path, fmt::format("the {} handle cannot be decoded", what));
  return handle;
}

}  // namespace

uint32_t decode_fixed32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

bool read_varint64(std::string_view& input, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < input.size() && i < 10; ++i) {
    const auto byte = static_cast<unsigned char>(input[i]);
    if (i == 9 && byte > 1) return false;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      input.remove_prefix(i + 1);
      *value = result;
      return true;
    }
  }
  return false;
}

bool read_varint32(std::string_view& input, uint32_t* value) {
  std::string_view rest = input;
  uint64_t wide = 0;
  if (!read_varint64(rest, &wide) || wide > UINT32_MAX) return false;
  input = rest;
  *value = static_cast<uint32_t>(wide);
  return true;
}

std::vector<Entry> decode_block(std::string_view contents, const std::string& where) {
  if (contents.size() < sizeof(uint32_t))
    corrupt(where, "a block is shorter than its restart count");
  const uint32_t num_restarts = decode_fixed32(contents.data() + contents.size() - 4);
  const size_t max_restarts = (contents.size() - 4) / 4;
  if (num_restarts > max_restarts)
    corrupt(where, fmt::format("a block claims {} restart points, more than its {} bytes hold",
                               num_restarts, contents.size()));
  std::string_view input = contents.substr(0, contents.size() - 4 * (size_t{num_restarts} + 1));
  std::vector<Entry> entries;
  std::string key;
  while (!input.empty()) {
    uint32_t shared = 0, non_shared = 0, value_size = 0;
    if (!read_varint32(input, &shared) || !read_varint32(input, &non_shared) ||
        !read_varint32(input, &value_size))
      corrupt(where, "a block entry's header cannot be decoded");
    if (shared > key.size() || size_t{non_shared} + value_size > input.size())
      corrupt(where, fmt::format("a block entry (after key \"{}\") runs past its block", key));
    key.resize(shared);
    key.append(input.substr(0, non_shared));
    entries.emplace_back(key, std::string(input.substr(non_shared, value_size)));
    input.remove_prefix(size_t{non_shared} + value_size);
  }
  return entries;
}

std::string read_block(std::string_view file, const BlockHandle& handle, const std::string& path,
                       std::string_view what) {
  const uint64_t end = handle.offset + handle.size + kBlockTrailerSize;
  if (handle.offset > file.size() || handle.size > file.size() || end > file.size())
    corrupt(path, fmt::format("the {} block handle (offset {}, size {}) points past the end of "
                              "the {}-byte file",
                              what, handle.offset, handle.size, file.size()));
  const std::string_view stored = file.substr(handle.offset, handle.size);
  const char* trailer = file.data() + handle.offset + handle.size;
  const uint32_t expected = data::unmask_crc(decode_fixed32(trailer + 1));
  const uint32_t actual = data::crc32c(file.data() + handle.offset, handle.size + 1);
  if (expected != actual)
    corrupt(path, fmt::format("the {} block at offset {} fails its CRC32C check (stored {:08x}, "
                              "computed {:08x})",
                              what, handle.offset, expected, actual));
  const auto type = static_cast<uint8_t>(trailer[0]);
  if (type == kRawBlock) return std::string(stored);
  if (type != kSnappyBlock)
    corrupt(path, fmt::format("the {} block at offset {} has compression type {}; only 0 (none) "
                              "and 1 (snappy) exist",
                              what, handle.offset, type));
  size_t uncompressed_size = 0;
  std::string uncompressed;
  if (!snappy::GetUncompressedLength(stored.data(), stored.size(), &uncompressed_size) ||
      !snappy::Uncompress(stored.data(), stored.size(), &uncompressed))
    corrupt(path, fmt::format("the snappy-compressed {} block at offset {} does not uncompress",
                              what, handle.offset));
  return uncompressed;
}

std::vector<Entry> read_table(std::string_view file, const std::string& path) {
  if (file.size() < kFooterSize)
    corrupt(path, fmt::format("it has {} bytes, fewer than the {}-byte table footer", file.size(),
                              kFooterSize));
  const char* footer = file.data() + file.size() - kFooterSize;
  const uint64_t magic = (uint64_t{decode_fixed32(footer + kFooterSize - 4)} << 32) |
                         decode_fixed32(footer + kFooterSize - 8);
  if (magic != kTableMagicNumber)
    corrupt(path, fmt::format("its footer ends in {:#018x}, not the table magic number {:#018x}",
                              magic, kTableMagicNumber));
  std::string_view handles(footer, kFooterSize - 8);
  (void)read_handle(handles, path, "metaindex");
  const BlockHandle index_handle = read_handle(handles, path, "index");
  const std::vector<Entry> index =
      decode_block(read_block(file, index_handle, path, "index"), path);

  std::vector<Entry> entries;
  for (const auto& [last_key, handle_bytes] : index) {
    std::string_view handle_input = handle_bytes;
    const BlockHandle handle = read_handle(handle_input, path, "data");
    std::vector<Entry> block = decode_block(read_block(file, handle, path, "data"), path);
    for (Entry& entry : block) {
      if (!entries.empty() && entry.first <= entries.back().first)
        corrupt(path, fmt::format("its keys are out of order at \"{}\"", entry.first));
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

std::vector<Entry> read_table_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw NotFoundError(fmt::format(
        "TensorFlow checkpoint index {} cannot be opened: {}; check the checkpoint prefix", path,
        std::strerror(errno)));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return read_table(bytes, path);
}

}  // namespace est::checkpoint::tf_table
