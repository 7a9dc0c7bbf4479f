// Little-endian, length-prefixed encoding of iterator state and elements.
//
// A tensor is a kind (0 undefined, 1 dense, 2 sparse: older states hold only 0 and 1), then for
// a dense one its dtype, rank, dimensions and data: the bytes as one string, or for a string
// tensor each element as a string; a sparse one is its dense shape, indices and values.
#include "data/state.h"

#include <cstring>

namespace est::data {

namespace {
constexpr uint64_t kMaxRank = 32;
}

void StateWriter::write_u64(uint64_t value) {
  char buffer[8];
  for (int i = 0; i < 8; ++i) buffer[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  bytes_.append(buffer, 8);
}

void StateWriter::write_string(std::string_view value) {
  write_u64(value.size());
  bytes_.append(value);
}

void StateWriter::write_tensor(const Tensor& tensor) {
  write_u64(!tensor.defined() ? 0 : tensor.is_sparse() ? 2 : 1);
  if (!tensor.defined()) return;
  if (!tensor.device().is_cpu())
    throw UnimplementedError("saving a dataset element that lives on " + tensor.device().str() +
                             ": iterator state and caches hold host tensors only; move the "
                             "copy to the device after the input pipeline");
  if (tensor.is_sparse()) {
    write_u64(static_cast<uint64_t>(tensor.rank()));
    for (int64_t d : tensor.shape()) write_i64(d);
    write_tensor(tensor.indices());
    write_tensor(tensor.values());
    return;
  }
  write_u64(static_cast<uint64_t>(tensor.dtype()));
  write_u64(static_cast<uint64_t>(tensor.rank()));
  for (int64_t d : tensor.shape()) write_i64(d);
  if (tensor.dtype() == DType::kString) {
    const std::string* values = tensor.data<std::string>();
    for (int64_t i = 0; i < tensor.numel(); ++i) write_string(values[i]);
    return;
  }
  write_string(std::string_view(static_cast<const char*>(tensor.raw_data()), tensor.nbytes()));
}

void StateWriter::write_element(const Element& element) {
  write_u64(element.features.size());
  for (const auto& [name, tensor] : element.features) {
    write_string(name);
    write_tensor(tensor);
  }
  write_tensor(element.labels);
  write_tensor(element.value);
}

void StateReader::need(size_t bytes, std::string_view field) {
  if (bytes_.size() - position_ < bytes)
    throw DataLossError(what_ + " is truncated: reading " + std::string(field) + " at byte " +
                        std::to_string(position_) + " needs " + std::to_string(bytes) +
                        " bytes but only " + std::to_string(bytes_.size() - position_) +
                        " remain; the saved state is damaged or incomplete");
}

uint64_t StateReader::read_u64() {
  need(8, "an integer");
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[position_ + i])) << (8 * i);
  position_ += 8;
  return value;
}

bool StateReader::read_bool() {
  uint64_t value = read_u64();
  if (value > 1)
    throw DataLossError(what_ + " is damaged: expected a flag (0 or 1) at byte " +
                        std::to_string(position_ - 8) + ", found " + std::to_string(value));
  return value == 1;
}

std::string StateReader::read_string() {
  uint64_t size = read_u64();
  need(size, "a string");
  std::string value(bytes_.substr(position_, size));
  position_ += size;
  return value;
}

Shape StateReader::read_shape() {
  uint64_t rank = read_u64();
  if (rank > kMaxRank)
    throw DataLossError(what_ + " is damaged: tensor rank " + std::to_string(rank));
  Shape shape(rank);
  for (auto& d : shape) {
    d = read_i64();
    if (d < 0) throw DataLossError(what_ + " is damaged: negative dimension");
  }
  return shape;
}

Tensor StateReader::read_tensor() {
  uint64_t kind = read_u64();
  if (kind == 0) return {};
  if (kind > 2)
    throw DataLossError(what_ + " is damaged: unknown tensor kind " + std::to_string(kind) +
                        " at byte " + std::to_string(position_ - 8));
  if (kind == 2) {
    Shape dense_shape = read_shape();
    Tensor indices = read_tensor();
    Tensor values = read_tensor();
    if (!indices.defined() || !values.defined() || indices.is_sparse() || values.is_sparse())
      throw DataLossError(what_ + " is damaged: a sparse tensor without dense indices and values");
    try {
      return Tensor::sparse(indices, values, dense_shape);
    } catch (const InvalidArgumentError& e) {
      throw DataLossError(what_ + " is damaged: " + e.what());
    }
  }
  uint64_t dtype = read_u64();
  if (dtype > static_cast<uint64_t>(DType::kString))
    throw DataLossError(what_ + " is damaged: unknown dtype code " + std::to_string(dtype));
  Shape shape = read_shape();
  if (dtype == static_cast<uint64_t>(DType::kString)) {
    long double count = 1;
    for (int64_t d : shape) count *= static_cast<long double>(d);
    if (count * 8 > static_cast<long double>(bytes_.size() - position_))  // before allocating
      throw DataLossError(what_ + " is damaged: a string tensor of shape " + ops::shape_str(shape) +
                          " cannot fit in the bytes that remain");
    Tensor tensor = Tensor::empty(shape, DType::kString);
    std::string* values = tensor.data<std::string>();
    for (int64_t i = 0; i < tensor.numel(); ++i) values[i] = read_string();
    return tensor;
  }
  uint64_t size = read_u64();
  need(size, "tensor data");
  long double expected = static_cast<long double>(ops::dtype_size(static_cast<DType>(dtype)));
  for (int64_t d : shape) expected *= static_cast<long double>(d);
  if (expected != static_cast<long double>(size))  // checked before allocating anything
    throw DataLossError(what_ + " is damaged: tensor of shape " + ops::shape_str(shape) +
                        " stored with " + std::to_string(size) + " bytes");
  Tensor tensor = Tensor::empty(shape, static_cast<DType>(dtype));
  if (size) std::memcpy(tensor.raw_data(), bytes_.data() + position_, size);
  position_ += size;
  return tensor;
}

Element StateReader::read_element() {
  Element element;
  uint64_t count = read_u64();
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = read_string();
    element.features.emplace(std::move(name), read_tensor());
  }
  element.labels = read_tensor();
  element.value = read_tensor();
  return element;
}

void StateReader::expect_stage(std::string_view stage) {
  size_t at = position_;
  std::string found = read_string();
  if (found != stage)
    throw InvalidArgumentError(what_ + " does not match this pipeline: at byte " +
                               std::to_string(at) + " the pipeline has a '" + std::string(stage) +
                               "' stage but the state was saved from a '" + found +
                               "' stage; restore with the same input_fn that saved it");
}

void write_error(StateWriter& writer, const std::exception_ptr& error) {
  writer.write_bool(error != nullptr);
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    writer.write_u64(static_cast<uint64_t>(e.code()));
    writer.write_string(e.what());
  } catch (const std::exception& e) {
    writer.write_u64(static_cast<uint64_t>(StatusCode::kUnknown));
    writer.write_string(e.what());
  } catch (...) {
    writer.write_u64(static_cast<uint64_t>(StatusCode::kUnknown));
    writer.write_string("unknown exception in the input pipeline");
  }
}

std::exception_ptr read_error(StateReader& reader) {
  if (!reader.read_bool()) return nullptr;
  uint64_t code = reader.read_u64();
  std::string message = reader.read_string();
  switch (static_cast<StatusCode>(code)) {
    case StatusCode::kCancelled:
      return std::make_exception_ptr(CancelledError(message));
    case StatusCode::kInvalidArgument:
      return std::make_exception_ptr(InvalidArgumentError(message));
    case StatusCode::kDeadlineExceeded:
      return std::make_exception_ptr(DeadlineExceededError(message));
    case StatusCode::kNotFound:
      return std::make_exception_ptr(NotFoundError(message));
    case StatusCode::kAlreadyExists:
      return std::make_exception_ptr(AlreadyExistsError(message));
    case StatusCode::kPermissionDenied:
      return std::make_exception_ptr(PermissionDeniedError(message));
    case StatusCode::kResourceExhausted:
      return std::make_exception_ptr(ResourceExhaustedError(message));
    case StatusCode::kFailedPrecondition:
      return std::make_exception_ptr(FailedPreconditionError(message));
    case StatusCode::kAborted:
      return std::make_exception_ptr(AbortedError(message));
    case StatusCode::kOutOfRange:
      return std::make_exception_ptr(OutOfRangeError(message));
    case StatusCode::kUnimplemented:
      return std::make_exception_ptr(UnimplementedError(message));
    case StatusCode::kInternal:
      return std::make_exception_ptr(InternalError(message));
    case StatusCode::kUnavailable:
      return std::make_exception_ptr(UnavailableError(message));
    case StatusCode::kDataLoss:
      return std::make_exception_ptr(DataLossError(message));
    default:
      return std::make_exception_ptr(UnknownError(message));
  }
}

std::string serialize_element(const Element& element) {
  StateWriter writer;
  writer.write_element(element);
  return writer.take();
}

Element deserialize_element(std::string_view bytes, const std::string& what) {
  StateReader reader(bytes, what);
  Element element = reader.read_element();
  if (!reader.at_end())
    throw DataLossError(what + " is damaged: " + std::to_string(bytes.size() - reader.position()) +
                        " unexpected bytes after the element");
  return element;
}

}  // namespace est::data
