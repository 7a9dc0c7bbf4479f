// Iterator state as bytes: what save_state()/restore_state() exchange and the checkpoint stores.
//
// Each stage writes a tag with its name and then its own fields (counters, RNG words, buffered
// elements) followed by its input's state, so a state is a pre-order walk of the pipeline.
// Reading checks every tag, so restoring a state into a different pipeline fails with a message
// naming the mismatched stage rather than producing a silently different stream. The same
// encoding serialises elements for the file cache.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "data/element.h"

namespace est::data {

class StateWriter {
 public:
  void write_u64(uint64_t value);
  void write_i64(int64_t value) { write_u64(static_cast<uint64_t>(value)); }
  void write_bool(bool value) { write_u64(value ? 1 : 0); }
  void write_string(std::string_view value);
  void write_tensor(const Tensor& tensor);  // undefined tensors allowed
  void write_element(const Element& element);
  // Marks the start of a stage's state; the reader checks it with expect_stage().
  void begin_stage(std::string_view stage) { write_string(stage); }

  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view bytes, std::string what = "iterator state")
      : bytes_(bytes), what_(std::move(what)) {}

  uint64_t read_u64();
  int64_t read_i64() { return static_cast<int64_t>(read_u64()); }
  bool read_bool();
  std::string read_string();
  Tensor read_tensor();
  Shape read_shape();  // rank then dimensions
  Element read_element();
  // Reads a stage tag; InvalidArgumentError when it is not `stage`.
  void expect_stage(std::string_view stage);

  bool at_end() const { return position_ == bytes_.size(); }
  size_t position() const { return position_; }

 private:
  void need(size_t bytes, std::string_view field);
  std::string_view bytes_;
  std::string what_;  // "iterator state", "cache file /tmp/x record 3", for messages
  size_t position_ = 0;
};

// An error held for a later next() (a failed map call in flight, a prefetch thread's failure),
// kept as its status code and message. A null exception_ptr round-trips as "no error".
void write_error(StateWriter& writer, const std::exception_ptr& error);
std::exception_ptr read_error(StateReader& reader);

// An element as a standalone byte string, and back (the file cache's record format).
std::string serialize_element(const Element& element);
Element deserialize_element(std::string_view bytes, const std::string& what);

}  // namespace est::data
