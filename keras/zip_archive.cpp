// Zip archives for `.keras` files (see zip_archive.h). Layout from the zip format
// (PKWARE APPNOTE): per entry a local header, the bytes; then the central directory and the
// end-of-central-directory record. Field values as Python's zipfile writes a stored entry:
// version 20, no flags, DOS date/time of the write, external attributes 0o600 << 16 (Unix).
#include "keras/zip_archive.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ops/error.h"

namespace est::keras {
namespace {

void put16(std::string& out, uint32_t value) {
  out += static_cast<char>(value & 0xff);
  out += static_cast<char>((value >> 8) & 0xff);
}
void put32(std::string& out, uint32_t value) {
  put16(out, value & 0xffff);
  put16(out, value >> 16);
}
uint32_t get16(const std::string& in, size_t at) {
  return static_cast<uint8_t>(in[at]) | (static_cast<uint8_t>(in[at + 1]) << 8);
}
uint32_t get32(const std::string& in, size_t at) {
  return get16(in, at) | (get16(in, at + 2) << 16);
}

uint32_t crc_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {  // crc32 takes a uInt length
    auto chunk = static_cast<uInt>(std::min<size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<uint32_t>(crc);
}

// The DOS time and date of now (local time, as zipfile's time.localtime()).
std::pair<uint32_t, uint32_t> dos_now() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  uint32_t time = (local.tm_hour << 11) | (local.tm_min << 5) | (local.tm_sec / 2);
  uint32_t date = ((local.tm_year - 80) << 9) | ((local.tm_mon + 1) << 5) | local.tm_mday;
  return {time, date};
}

constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;

std::string inflate_raw(const std::string& data, size_t size, const std::string& where) {
  std::string out(size, '\0');
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw InternalError("zlib: inflateInit2");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = inflate(&stream, Z_FINISH);
  inflateEnd(&stream);
  if (status != Z_STREAM_END || stream.total_out != size)
    throw DataLossError(where + ": its deflated data is damaged");
  return out;
}

}  // namespace

void write_zip(const std::string& path, const ZipEntries& entries) {
  auto [time, date] = dos_now();
  std::string out;
  std::string central;
  for (const auto& [name, bytes] : entries) {
    if (bytes.size() >= 0xffffffffu || out.size() >= 0xffffffffu)
      throw UnimplementedError(
          fmt::format("{}: entries over 4 GiB (zip64) are not supported", path));
    uint32_t offset = static_cast<uint32_t>(out.size());
    uint32_t crc = crc_of(bytes);
    auto size = static_cast<uint32_t>(bytes.size());
    put32(out, kLocalSignature);
    put16(out, 20);  // version needed to extract
    put16(out, 0);   // flags
    put16(out, 0);   // method: stored
    put16(out, time);
    put16(out, date);
    put32(out, crc);
    put32(out, size);
    put32(out, size);
    put16(out, static_cast<uint32_t>(name.size()));
    put16(out, 0);  // extra field length
    out += name;
    out += bytes;

    put32(central, kCentralSignature);
    put16(central, (3 << 8) | 20);  // made by: Unix, version 2.0
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, time);
    put16(central, date);
    put32(central, crc);
    put32(central, size);
    put32(central, size);
    put16(central, static_cast<uint32_t>(name.size()));
    put16(central, 0);  // extra
    put16(central, 0);  // comment
    put16(central, 0);  // disk number
    put16(central, 0);  // internal attributes
    put32(central, 0600u << 16);
    put32(central, offset);
    central += name;
  }
  auto central_offset = static_cast<uint32_t>(out.size());
  out += central;
  put32(out, kEndSignature);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(entries.size()));
  put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, central_offset);
  put16(out, 0);  // comment length

  std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) throw UnavailableError(fmt::format("cannot write {}", path));
}

ZipEntries read_zip(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NotFoundError(fmt::format("No file or directory found at {}", path));
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string in = buffer.str();
  auto damaged = [&](const std::string& what) {
    return DataLossError(fmt::format(
        "{} is not a valid .keras archive: {}; the file is damaged or truncated (save the model "
        "again with model.save(\"{}\"))",
        path, what, path));
  };
  // The end record is the last 22 bytes unless the archive has a comment (up to 64 KiB).
  size_t end = std::string::npos;
  for (size_t at = in.size() >= 22 ? in.size() - 22 : std::string::npos;
       at != std::string::npos && in.size() - at <= 22 + 0xffff; --at) {
    if (get32(in, at) == kEndSignature) {
      end = at;
      break;
    }
    if (at == 0) break;
  }
  if (end == std::string::npos)
    throw damaged(fmt::format("no zip end-of-central-directory record in its {} bytes", in.size()));
  const uint32_t count = get16(in, end + 10);
  const uint32_t central_size = get32(in, end + 12);
  const uint32_t central_offset = get32(in, end + 16);
  if (static_cast<uint64_t>(central_offset) + central_size > end)
    throw damaged("its central directory lies outside the file");
  ZipEntries out;
  size_t at = central_offset;
  for (uint32_t i = 0; i < count; ++i) {
    if (at + 46 > end || get32(in, at) != kCentralSignature)
      throw damaged(fmt::format("central directory entry {} is damaged", i));
    const uint32_t method = get16(in, at + 10);
    const uint32_t crc = get32(in, at + 16);
    const uint32_t packed = get32(in, at + 20);
    const uint32_t size = get32(in, at + 24);
    const uint32_t name_length = get16(in, at + 28);
    const uint32_t skip = get16(in, at + 30) + get16(in, at + 32);
    const uint32_t local = get32(in, at + 42);
    if (at + 46 + name_length > end) throw damaged("a central directory name is cut off");
    std::string name = in.substr(at + 46, name_length);
    at += 46 + name_length + skip;
    if (static_cast<uint64_t>(local) + 30 > in.size() || get32(in, local) != kLocalSignature)
      throw damaged(fmt::format("the local header of \"{}\" is missing", name));
    size_t data = local + 30 + get16(in, local + 26) + get16(in, local + 28);
    if (data + packed > central_offset)
      throw damaged(fmt::format("\"{}\" is cut off ({} bytes declared)", name, packed));
    std::string bytes;
    if (method == 0) {
      if (packed != size) throw damaged(fmt::format("\"{}\" has inconsistent sizes", name));
      bytes = in.substr(data, size);
    } else if (method == 8) {
      bytes = inflate_raw(in.substr(data, packed), size, fmt::format("{}: \"{}\"", path, name));
    } else {
      throw damaged(fmt::format("\"{}\" uses compression method {} (stored and deflated only)",
                                name, method));
    }
    if (crc_of(bytes) != crc) throw damaged(fmt::format("\"{}\" fails its CRC-32 check", name));
    out.emplace_back(std::move(name), std::move(bytes));
  }
  return out;
}

}  // namespace est::keras
