// est's TensorFlow checkpoint writer checked from the outside: tests/scripts/tf_bundle_read.py
// (a reader written from the format's description, with protoc-generated Python classes, not
// est's reader) reads a bundle est wrote, every CRC32C checked, and every value equals what
// est wrote: each dtype est has, scalars, empty tensors, strings, and enough keys for several
// index blocks with their restart points.
#include <doctest/doctest.h>

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/tf_bundle_writer.h"
#include "tests/skip.h"
#include "tf_bundle_helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;

namespace {

struct Output {
  int status = -1;
  std::string text;
};

Output run(const std::string& command) {
  Output output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    output.text.append(buffer, n);
  const int status = ::pclose(pipe);
  output.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

// The reader prints strings as latin-1 text, which JSON carries as UTF-8: back to bytes.
std::string latin1(const std::string& utf8) {
  std::string bytes;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80 || i + 1 == utf8.size()) {
      bytes.push_back(static_cast<char>(c));
    } else {
      bytes.push_back(static_cast<char>(((c & 0x1f) << 6) | (utf8[++i] & 0x3f)));
    }
  }
  return bytes;
}

// Element i of `tensor` compared with the reader's JSON value.
bool same_element(const ops::Tensor& tensor, int64_t i, const nlohmann::json& value) {
  switch (tensor.dtype()) {
    case ops::DType::kF32:
      return value.get<double>() == static_cast<double>(tensor.data<float>()[i]);
    case ops::DType::kBF16:
      return value.get<double>() == static_cast<double>(tensor.data<ops::bfloat16>()[i]);
    case ops::DType::kF64:
      return value.get<double>() == tensor.data<double>()[i];
    case ops::DType::kI32:
      return value.get<int64_t>() == tensor.data<int32_t>()[i];
    case ops::DType::kI64:
      return value.get<int64_t>() == tensor.data<int64_t>()[i];
    case ops::DType::kU8:
      return value.get<int64_t>() == tensor.data<uint8_t>()[i];
    case ops::DType::kBool:
      return value.get<bool>() == tensor.data<bool>()[i];
    case ops::DType::kString:
      return latin1(value.get<std::string>()) == tensor.data<std::string>()[i];
  }
  return false;
}

std::optional<std::string> python_reader_unavailable() {
  const Output probe =
      run("/usr/bin/python3 -c 'import numpy, google.protobuf' 2>&1 && protoc --version 2>&1");
  if (probe.status == 0) return std::nullopt;
  return "the independent reader needs /usr/bin/python3 with numpy and protobuf, and protoc "
         "(Debian: python3-numpy python3-protobuf protobuf-compiler): " +
         probe.text.substr(0, probe.text.find('\n'));
}

}  // namespace

TEST_CASE("the independent Python reader reads est's TF bundle: every value as est wrote it") {
  if (auto reason = python_reader_unavailable()) return est::testing::skip(*reason);
  BundleDir dir;
  auto tensors = every_dtype();
  for (int i = 0; i < 120; ++i)  // several index blocks at this block size
    tensors.emplace_back(fmt::format("linear/linear_model/feature_{:03d}/weights", i),
                         ops::Tensor::from_vector<float>({0.25f * i, -1.0f / (i + 1)}, {2, 1}));
  {
    TfBundleWriter writer(dir.prefix(), {.index_block_size = 512});
    for (const auto& [name, value] : tensors) writer.add(name, value);
    writer.finish();
  }
  const Output output =
      run(fmt::format("/usr/bin/python3 {}/tests/scripts/tf_bundle_read.py {} "
                      "--json 2>&1",
                      EST_SOURCE_ROOT, dir.prefix()));
  REQUIRE_MESSAGE(output.status == 0, output.text);
  const nlohmann::json read = nlohmann::json::parse(output.text);
  CHECK(read.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) {
    INFO("tensor " << name);
    REQUIRE(read.contains(name));
    const auto& entry = read[name];
    CHECK(entry["dtype"].get<std::string>() == std::string(ops::dtype_name(tensor.dtype())));
    CHECK(entry["shape"].get<std::vector<int64_t>>() == tensor.shape());
    REQUIRE(static_cast<int64_t>(entry["values"].size()) == tensor.numel());
    for (int64_t i = 0; i < tensor.numel(); ++i)
      CHECK_MESSAGE(same_element(tensor, i, entry["values"][i]), "element ", i);
  }

  // Not vacuous: one flipped byte of the data shard makes the reader fail on its CRC.
  {
    std::string shard = read_bytes(dir.prefix() + ".data-00000-of-00001");
    shard[3] ^= 0x10;
    write_bytes(dir.prefix() + ".data-00000-of-00001", shard);
  }
  const Output damaged =
      run(fmt::format("/usr/bin/python3 {}/tests/scripts/tf_bundle_read.py {} 2>&1",
                      EST_SOURCE_ROOT, dir.prefix()));
  CHECK(damaged.status == 1);
  CHECK(damaged.text.find("fails its CRC32C check") != std::string::npos);
}
