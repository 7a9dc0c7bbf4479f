// IDX parsing: a 4-byte magic (0, 0, type code, number of dimensions), big-endian uint32 dims,
// then the values big-endian in row-major order.
#include "data/idx.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "data/background_read.h"
#include "data/file_stream.h"
#include "data/stages.h"

namespace est::data {

namespace {

struct IdxType {
  DType dtype;
  size_t file_size;
  const char* name;
};

IdxType idx_type(uint8_t code, const std::string& path) {
  switch (code) {
    case 0x08:
      return {DType::kU8, 1, "uint8"};
    case 0x09:
      return {DType::kI32, 1, "int8"};
    case 0x0B:
      return {DType::kI32, 2, "int16"};
    case 0x0C:
      return {DType::kI32, 4, "int32"};
    case 0x0D:
      return {DType::kF32, 4, "float32"};
    case 0x0E:
      return {DType::kF64, 8, "float64"};
  }
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02X", code);
  throw DataLossError("bad IDX type code " + std::string(hex) + " in '" + path +
                      "': expected 0x08 (uint8), 0x09, 0x0B, 0x0C, 0x0D or 0x0E");
}

// Big-endian file values into the tensor's native ones.
void convert(const unsigned char* in, Tensor& out, uint8_t code) {
  int64_t n = out.numel();
  auto be = [&](int64_t i, size_t size) {
    uint64_t v = 0;
    for (size_t b = 0; b < size; ++b)
      v = (v << 8) | in[i * static_cast<int64_t>(size) + static_cast<int64_t>(b)];
    return v;
  };
  switch (code) {
    case 0x08:
      std::memcpy(out.raw_data(), in, static_cast<size_t>(n));
      break;
    case 0x09:
      for (int64_t i = 0; i < n; ++i) out.data<int32_t>()[i] = static_cast<int8_t>(in[i]);
      break;
    case 0x0B:
      for (int64_t i = 0; i < n; ++i) out.data<int32_t>()[i] = static_cast<int16_t>(be(i, 2));
      break;
    case 0x0C:
      for (int64_t i = 0; i < n; ++i) out.data<int32_t>()[i] = static_cast<int32_t>(be(i, 4));
      break;
    case 0x0D:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = static_cast<uint32_t>(be(i, 4));
        std::memcpy(out.data<float>() + i, &bits, 4);
      }
      break;
    case 0x0E:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t bits = be(i, 8);
        std::memcpy(out.data<double>() + i, &bits, 8);
      }
      break;
  }
}

Compression detect_compression(const std::string& path) {
  InputStream probe(path, Compression::kNone, 4096);  // two bytes: no 256 KB read for them
  unsigned char magic[2] = {0, 0};
  size_t got = probe.read(magic, 2);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b ? Compression::kGzip : Compression::kNone;
}

// A byte count that may not fit 64 bits, for messages.
std::string fmt_bytes(long double bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.0Lf", bytes);
  return text;
}

std::string hex32(uint32_t value) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%08X", value);
  return hex;
}

// The existing one of `name.gz` and `name`, or NotFoundError naming both.
std::string find_idx_file(const std::string& directory, const std::string& name) {
  std::filesystem::path base = std::filesystem::path(directory) / name;
  std::string gz = base.string() + ".gz";
  if (std::filesystem::exists(gz)) return gz;
  if (std::filesystem::exists(base)) return base.string();
  throw NotFoundError("MNIST file not found: neither '" + gz + "' nor '" + base.string() +
                      "' exists; for Fashion-MNIST install the Debian package "
                      "dataset-fashion-mnist, or pass the directory holding the IDX files");
}

// An IDX file opened past its header: magic, type and dimensions checked, and the dimensions
// against what the file can still hold; the stream stands at the first value.
struct IdxHeader {
  std::unique_ptr<InputStream> stream;
  std::string path;
  uint8_t code = 0;
  IdxType type;
  Shape shape;
  size_t bytes = 0;   // of the values, as stored
  std::string field;  // names the header's dimensions in messages
};

IdxHeader open_checked(const std::string& path, uint32_t expected_magic, const char* what) {
  auto stream = std::make_unique<InputStream>(path, detect_compression(path));
  unsigned char header[4];
  if (stream->read(header, 4) < 4)
    throw DataLossError("truncated IDX file '" + path + "': shorter than its 4-byte magic number");
  uint32_t magic = (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                   (uint32_t{header[2]} << 8) | header[3];
  if (expected_magic != 0 && magic != expected_magic)
    throw DataLossError("bad IDX magic number in '" + path + "': expected " +
                        hex32(expected_magic) + " (" + what + ") but found " + hex32(magic) +
                        "; is this the right file?");
  if (header[0] != 0 || header[1] != 0)
    throw DataLossError("bad IDX magic number in '" + path + "': " + hex32(magic) +
                        " does not start with two zero bytes; this is not an IDX file");
  IdxType type = idx_type(header[2], path);
  size_t rank = header[3];
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    unsigned char dim[4];
    if (stream->read(dim, 4) < 4)
      throw DataLossError("truncated IDX file '" + path + "': the header promises " +
                          std::to_string(rank) + " dimensions but ends after " + std::to_string(i));
    shape[i] = (int64_t{dim[0]} << 24) | (int64_t{dim[1]} << 16) | (int64_t{dim[2]} << 8) | dim[3];
  }
  // The dimensions must describe no more data than the file can still hold (exactly what is
  // left of an uncompressed file; deflate's largest expansion of a gzipped one), checked
  // before anything is allocated. Four dims of up to 2^32 would overflow 64 bits: the long
  // double product only decides, the exact size is computed once it is known to fit.
  long double product = static_cast<long double>(type.file_size);
  for (int64_t d : shape) product *= static_cast<long double>(d);
  const uint64_t available = stream->max_remaining();
  if (product > static_cast<long double>(available)) {
    std::string holds = stream->compression() == Compression::kNone
                            ? "the file holds " + std::to_string(available)
                            : "the compressed file can hold at most " + std::to_string(available);
    throw DataLossError("truncated IDX file '" + path + "': its header's dimensions " +
                        ops::shape_str(shape) + " of " + type.name + " declare " +
                        fmt_bytes(product) + " bytes after the header, but " + holds +
                        "; the header is damaged or the file is cut short");
  }
  size_t bytes = static_cast<size_t>(ops::num_elements(shape)) * type.file_size;
  std::string field = "IDX file '" + path + "': the header's dimensions " + ops::shape_str(shape) +
                      " of " + type.name;
  return {std::move(stream), path, header[2], type, std::move(shape), bytes, std::move(field)};
}

// After the values: `got` of them read; the file must hold all of them and nothing more.
void check_end(InputStream& stream, const std::string& path, const IdxType& type,
               const Shape& shape, size_t bytes, size_t got) {
  if (got < bytes)
    throw DataLossError("truncated IDX file '" + path + "': shape " + ops::shape_str(shape) +
                        " of " + type.name + " needs " + std::to_string(bytes) +
                        " bytes after the header, found " + std::to_string(got));
  unsigned char extra;
  if (stream.read(&extra, 1) != 0)
    throw DataLossError("IDX file '" + path + "' has bytes after the " + std::to_string(bytes) +
                        " that its header " + ops::shape_str(shape) + " describes; it is damaged");
}

Tensor read_checked(const std::string& path, uint32_t expected_magic, const char* what) {
  IdxHeader idx = open_checked(path, expected_magic, what);
  const bool bytes_as_they_are = idx.code == 0x08;
  Tensor out = allocate_declared(idx.bytes, idx.field,
                                 [&] { return Tensor::empty(idx.shape, idx.type.dtype); });
  // uint8 data is read straight into the tensor; other types go through a big-endian buffer.
  std::vector<unsigned char> raw = allocate_declared(idx.bytes, idx.field, [&] {
    return std::vector<unsigned char>(bytes_as_they_are ? 0 : idx.bytes);
  });
  unsigned char* target =
      bytes_as_they_are ? static_cast<unsigned char*>(out.raw_data()) : raw.data();
  check_end(*idx.stream, path, idx.type, idx.shape, idx.bytes, idx.stream->read(target, idx.bytes));
  if (!bytes_as_they_are) convert(raw.data(), out, idx.code);
  return out;
}

// The images file [n, rows, cols] (uint8, as its magic number 0x803 says), read into a tensor
// by a background thread: the first images can be used while the rest is still inflated.
std::pair<Tensor, std::shared_ptr<const ArrivingRows>> read_images_in_background(
    const std::string& path) {
  IdxHeader idx = open_checked(path, 0x00000803, "uint8 images, 3 dimensions");
  Tensor images =
      allocate_declared(idx.bytes, idx.field, [&] { return Tensor::empty(idx.shape, DType::kU8); });
  auto finish = [path, type = idx.type, shape = idx.shape, bytes = idx.bytes](InputStream& stream,
                                                                              size_t got) {
    check_end(stream, path, type, shape, bytes, got);
  };
  auto arriving = std::make_shared<BackgroundRead>(std::move(idx.stream), images, finish);
  return {images, std::move(arriving)};
}

}  // namespace

Tensor read_idx(const std::string& path) { return read_checked(path, 0, ""); }

Dataset mnist(const std::string& directory, const std::string& split) {
  std::string prefix;
  if (split == "train")
    prefix = "train";
  else if (split == "test" || split == "t10k")
    prefix = "t10k";
  else
    throw InvalidArgumentError("mnist: unknown split '" + split + "'; use \"train\" or \"test\"");
  std::string images_path = find_idx_file(directory, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_idx_file(directory, prefix + "-labels-idx1-ubyte");
  // The images arrive in the background (most of the time to a first batch was inflating
  // them whole); the labels, 1/784 of the bytes, are read at once.
  auto load = [images_path, labels_path] {
    auto [images, arriving] = read_images_in_background(images_path);
    Tensor labels = read_checked(labels_path, 0x00000801, "uint8 labels, 1 dimension");
    if (images.dim(0) != labels.dim(0))
      throw DataLossError("'" + images_path + "' holds " + std::to_string(images.dim(0)) +
                          " images but '" + labels_path + "' holds " +
                          std::to_string(labels.dim(0)) +
                          " labels; the files do not belong together");
    Tensor labels64 = Tensor::empty({labels.dim(0)}, DType::kI64);
    const uint8_t* in = labels.data<uint8_t>();
    int64_t* out = labels64.data<int64_t>();
    for (int64_t i = 0; i < labels.dim(0); ++i) out[i] = in[i];
    return LoadedColumns{
        Element(
            Features{{"image", images.reshape({images.dim(0), images.dim(1), images.dim(2), 1})}},
            labels64),
        std::move(arriving)};
  };
  return Dataset(make_arriving_slices_node(load, "mnist(" + directory + ", " + split + ")",
                                           /*reloadable=*/true));
}

Dataset fashion_mnist(const std::string& split, const std::string& directory) {
  return mnist(directory, split);
}

Element scale(Element element) {
  auto convert_u8 = [](Tensor& tensor) {
    if (!tensor.defined() || tensor.dtype() != DType::kU8) return;
    Tensor out = Tensor::empty(tensor.shape(), DType::kF32);
    const uint8_t* in = tensor.data<uint8_t>();
    float* dst = out.data<float>();
    int64_t n = tensor.numel();
    // Each byte's quotient from a table of the 256 (the same float as the division).
    static const std::array<float, 256> kQuotients = [] {
      std::array<float, 256> table{};
      for (int v = 0; v < 256; ++v) table[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
      return table;
    }();
    for (int64_t i = 0; i < n; ++i) dst[i] = kQuotients[in[i]];
    tensor = out;
  };
  for (auto& [name, tensor] : element.features) convert_u8(tensor);
  convert_u8(element.value);
  return element;
}

}  // namespace est::data
