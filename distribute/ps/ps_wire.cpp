// Encoding of the ps messages: little helpers that append and read fixed-size fields.
#include "distribute/ps/ps_wire.h"

#include <fmt/format.h>

#include <cstring>

namespace est::distribute {
namespace {

// Where a Writer puts its bytes: appended to a string, counted only, or copied to memory of the
// counted size (a shared-memory channel's buffer).
struct StringSink {
  static constexpr bool kCountsOnly = false;
  std::string& bytes;
  void append(const void* data, size_t n) { bytes.append(static_cast<const char*>(data), n); }
};
struct CountSink {
  static constexpr bool kCountsOnly = true;
  size_t bytes = 0;
  void append(const void*, size_t n) { bytes += n; }
};
struct MemorySink {
  static constexpr bool kCountsOnly = false;
  char* at;
  void append(const void* data, size_t n) {
    std::memcpy(at, data, n);
    at += n;
  }
};

template <class Sink>
class Writer {
 public:
  explicit Writer(Sink& sink) : sink_(sink) {}
  template <class T>
  void put(T value) {
    sink_.append(&value, sizeof value);
  }
  void put_string(std::string_view s) {
    put(static_cast<uint64_t>(s.size()));
    sink_.append(s.data(), s.size());
  }
  void put_tensor(const ops::Tensor& tensor, const std::string& name) {
    if (ops::is_string(tensor.dtype()))
      throw InvalidArgumentError(fmt::format(
          "a parameter server holds numeric variables only; '{}' is a string tensor", name));
    put(static_cast<uint8_t>(tensor.is_sparse() ? 1 : 0));
    if (tensor.is_sparse()) {
      put_shape(tensor.shape());
      put_tensor(tensor.indices(), name);
      put_tensor(tensor.values(), name);
      return;
    }
    put(static_cast<uint8_t>(tensor.dtype()));
    put_shape(tensor.shape());
    put(static_cast<uint64_t>(tensor.nbytes()));
    if constexpr (Sink::kCountsOnly) {
      sink_.append(nullptr, tensor.nbytes());
    } else {
      ops::Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(ops::Device::cpu());
      sink_.append(host.raw_data(), host.nbytes());
    }
  }
  // Tagged as a tensor is: 2 marks row slices.
  void put_slices(const ops::IndexedSlices& slices, const std::string& name) {
    put(static_cast<uint8_t>(2));
    put_shape(slices.dense_shape);
    put_tensor(slices.indices, name);
    put_tensor(slices.values, name);
  }
  void put_tensors(const std::vector<NamedTensor>& tensors) {
    put(static_cast<uint64_t>(tensors.size()));
    for (const NamedTensor& t : tensors) {
      put_string(t.name);
      if (t.rows.defined())
        put_slices(t.rows, t.name);
      else
        put_tensor(t.value, t.name);
    }
  }
  void put_shape(const ops::Shape& shape) {
    put(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) put(d);
  }

 private:
  Sink& sink_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& from) : bytes_(bytes), from_(from) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string get_string() {
    uint64_t n = get<uint64_t>();
    need(n);
    std::string s(bytes_.substr(at_, n));
    at_ += n;
    return s;
  }
  ops::Tensor get_tensor() { return get_tensor(get<uint8_t>()); }
  // `target`: a host tensor to decode a dense tensor of its dtype and shape into.
  ops::Tensor get_tensor(uint8_t tag, ops::Tensor* target = nullptr) {
    if (tag > 1) bad("row slices where a tensor belongs");
    if (tag == 1) {
      ops::Shape dense_shape = get_shape();
      ops::Tensor indices = get_tensor();
      ops::Tensor values = get_tensor();
      return ops::Tensor::sparse(indices, values, dense_shape);
    }
    auto dtype = static_cast<ops::DType>(get<uint8_t>());
    if (dtype > ops::DType::kBF16) bad("an unknown dtype");
    ops::Shape shape = get_shape();
    uint64_t n = get<uint64_t>();
    bool into = target != nullptr && target->defined() && target->device().is_cpu() &&
                !target->is_sparse() && target->dtype() == dtype && target->shape() == shape;
    ops::Tensor tensor = into ? *target : ops::Tensor::empty(shape, dtype);
    if (n != tensor.nbytes()) bad("a tensor whose bytes do not match its shape");
    need(n);
    std::memcpy(tensor.raw_data(), bytes_.data() + at_, n);
    at_ += n;
    return tensor;
  }
  std::vector<NamedTensor> get_tensors(const DecodeInto& into = {}) {
    uint64_t n = get<uint64_t>();
    std::vector<NamedTensor> tensors;
    for (uint64_t i = 0; i < n; ++i) {
      NamedTensor t{.name = get_string()};
      auto tag = get<uint8_t>();
      if (tag == 2)
        t.rows = get_slices(t.name);
      else
        t.value = get_tensor(tag, into && tag == 0 ? into(t.name) : nullptr);
      tensors.push_back(std::move(t));
    }
    return tensors;
  }
  void finish() {
    if (at_ != bytes_.size()) bad("trailing bytes");
  }

 private:
  // Row slices as make_indexed_slices checks them (indices int64 [n] within the rows, values
  // [n, ...]): malformed ones are a DataLossError like any other malformed message.
  ops::IndexedSlices get_slices(const std::string& name) {
    ops::Shape dense_shape = get_shape();
    ops::Tensor indices = get_tensor();
    ops::Tensor values = get_tensor();
    try {
      return ops::make_indexed_slices(indices, values, dense_shape);
    } catch (const InvalidArgumentError& error) {
      bad(fmt::format("malformed row slices for '{}' ({})", name, error.what()).c_str());
    }
  }
  ops::Shape get_shape() {
    uint32_t rank = get<uint32_t>();
    if (rank > 32) bad("a tensor of rank over 32");
    ops::Shape shape(rank);
    for (int64_t& d : shape) {
      d = get<int64_t>();
      if (d < 0) bad("a negative dimension");
    }
    return shape;
  }
  void need(uint64_t n) {
    if (n > bytes_.size() - at_) bad("a truncated message");
  }
  [[noreturn]] void bad(const char* what) {
    throw DataLossError(fmt::format(
        "a parameter-server message from {} holds {}: the tasks run different builds of est, or "
        "the connection is corrupt",
        from_, what));
  }
  std::string_view bytes_;
  const std::string& from_;
  size_t at_ = 0;
};

template <class Sink>
void write(Sink& sink, const PsRequest& request) {
  Writer w(sink);
  w.put(static_cast<uint8_t>(request.kind));
  w.put(request.global_step);
  w.put_tensors(request.tensors);
  w.put(static_cast<uint64_t>(request.names.size()));
  for (const std::string& name : request.names) w.put_string(name);
  w.put_string(request.message);
  w.put(static_cast<uint64_t>(request.moving_averages.size()));
  for (const PsMovingAverage& average : request.moving_averages) {
    w.put_string(average.name);
    w.put_tensor(average.value, average.name);
    w.put(average.momentum);
  }
}

template <class Sink>
void write(Sink& sink, const PsReply& reply) {
  Writer w(sink);
  w.put(static_cast<int32_t>(reply.code));
  w.put_string(reply.message);
  w.put(reply.global_step);
  w.put(reply.token);
  w.put_tensors(reply.tensors);
}

// send_in_place and send_message for both kinds of message.
template <class Message>
uint64_t send_any_in_place(Link& link, const Message& message, const HealthCheck& health,
                           const std::string& what, bool wait = true) {
  CountSink count;
  write(count, message);
  uint64_t n = count.bytes;
  bool sent = link.send_whole(
      sizeof n + n,
      [&](char* at) {
        std::memcpy(at, &n, sizeof n);
        MemorySink memory{at + sizeof n};
        write(memory, message);
      },
      health, what, wait);
  return sent ? sizeof n + n : 0;
}

template <class Message>
uint64_t send_any(Link& link, const Message& message, std::string& buffer,
                  const HealthCheck& health, const std::string& what) {
  if (uint64_t sent = send_any_in_place(link, message, health, what)) return sent;
  encode(message, buffer);
  send_frame(link, buffer, health, what);
  return sizeof(uint64_t) + buffer.size();
}

}  // namespace

void encode(const PsRequest& request, std::string& out) {
  out.clear();
  StringSink sink{out};
  write(sink, request);
}

void encode(const PsReply& reply, std::string& out) {
  out.clear();
  StringSink sink{out};
  write(sink, reply);
}

uint64_t send_in_place(Link& link, const PsRequest& request, const HealthCheck& health,
                       const std::string& what, bool wait) {
  return send_any_in_place(link, request, health, what, wait);
}

uint64_t send_in_place(Link& link, const PsReply& reply, const HealthCheck& health,
                       const std::string& what, bool wait) {
  return send_any_in_place(link, reply, health, what, wait);
}

uint64_t send_message(Link& link, const PsRequest& request, std::string& buffer,
                      const HealthCheck& health, const std::string& what) {
  return send_any(link, request, buffer, health, what);
}

uint64_t send_message(Link& link, const PsReply& reply, std::string& buffer,
                      const HealthCheck& health, const std::string& what) {
  return send_any(link, reply, buffer, health, what);
}

std::string encode(const PsRequest& request) {
  std::string out;
  encode(request, out);
  return out;
}

std::string encode(const PsReply& reply) {
  std::string out;
  encode(reply, out);
  return out;
}

PsRequest decode_request(std::string_view bytes, const std::string& from) {
  Reader r(bytes, from);
  PsRequest request;
  auto kind = r.get<uint8_t>();
  bool known = (kind >= 1 && kind <= static_cast<uint8_t>(PsRequestKind::kSyncStep)) ||
               kind == static_cast<uint8_t>(PsRequestKind::kStage) ||
               kind == static_cast<uint8_t>(PsRequestKind::kDiscardStaged);
  if (!known)
    throw DataLossError(
        fmt::format("a parameter-server request from {} has unknown kind {}", from, kind));
  request.kind = static_cast<PsRequestKind>(kind);
  request.global_step = r.get<int64_t>();
  request.tensors = r.get_tensors();
  uint64_t names = r.get<uint64_t>();
  for (uint64_t i = 0; i < names; ++i) request.names.push_back(r.get_string());
  request.message = r.get_string();
  uint64_t averages = r.get<uint64_t>();
  for (uint64_t i = 0; i < averages; ++i) {
    PsMovingAverage average{.name = r.get_string(), .value = {}, .momentum = 0};
    average.value = r.get_tensor();
    average.momentum = r.get<double>();
    request.moving_averages.push_back(std::move(average));
  }
  r.finish();
  return request;
}

PsReply decode_reply(std::string_view bytes, const std::string& from, const DecodeInto& into) {
  Reader r(bytes, from);
  PsReply reply;
  reply.code = static_cast<StatusCode>(r.get<int32_t>());
  reply.message = r.get_string();
  reply.global_step = r.get<int64_t>();
  reply.token = r.get<int64_t>();
  reply.tensors = r.get_tensors(into);
  r.finish();
  return reply;
}

void send_frame(Link& link, const std::string& bytes, const HealthCheck& health,
                const std::string& what) {
  uint64_t n = bytes.size();
  link.send(&n, sizeof n, health, what);
  link.send(bytes.data(), bytes.size(), health, what);
}

namespace {

uint64_t receive_frame_size(Link& link, const HealthCheck& health, const std::string& what,
                            uint64_t max_bytes) {
  uint64_t n = 0;
  link.receive(&n, sizeof n, health, what);
  if (n > max_bytes)
    throw DataLossError(
        fmt::format("{} sent a frame of {} bytes during {} (at most {}): it is "
                    "not an est parameter-server peer",
                    link.peer(), n, what, max_bytes));
  return n;
}

}  // namespace

void receive_frame(Link& link, const HealthCheck& health, const std::string& what, std::string& out,
                   uint64_t max_bytes) {
  uint64_t n = receive_frame_size(link, health, what, max_bytes);
  out.resize(n);  // within its capacity: no fresh pages, no zeroing
  link.receive(out.data(), n, health, what);
}

uint64_t receive_frame(Link& link, const HealthCheck& health, const std::string& what,
                       std::string& buffer, const std::function<void(std::string_view)>& consume,
                       uint64_t max_bytes) {
  uint64_t n = receive_frame_size(link, health, what, max_bytes);
  link.receive_whole(n, buffer, consume, health, what);
  return n;
}

std::string receive_frame(Link& link, const HealthCheck& health, const std::string& what,
                          uint64_t max_bytes) {
  std::string bytes;
  receive_frame(link, health, what, bytes, max_bytes);
  return bytes;
}

void trim_frame_buffer(std::string& buffer) {
  if (buffer.capacity() > (size_t{64} << 20)) std::string().swap(buffer);
}

}  // namespace est::distribute
