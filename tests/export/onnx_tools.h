// The export suites' independent checkers: onnx.checker (Debian's python3-onnx, through
// /usr/bin/python3) and onnxruntime-node (installed into build/npm by find_onnxruntime.sh).
// Each returns false after est::testing::skip(reason) when its tool cannot be had.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "export/trace.h"
#include "tests/command.h"
#include "tests/skip.h"

namespace est::testing {

inline std::string source_path(const std::string& relative) {
  return std::string(EST_SOURCE_ROOT) + "/" + relative;
}

// REQUIREs that onnx.checker (full check) accepts the file at `path`.
inline bool check_with_onnx_checker(const std::string& path) {
  auto checked =
      run_program("/usr/bin/python3 " + shell_quote(source_path("tests/export/onnx_check.py")) +
                  " " + shell_quote(path));
  if (checked.exit_code == 3) {
    skip(checked.output);
    return false;
  }
  INFO(checked.output);
  REQUIRE(checked.exit_code == 0);
  return true;
}

// onnxruntime-node's outputs for `inputs` (float32, int64 or string tensors) into `outputs`:
// {"name": {"dims": [...], "data": [...]}} (strings for a string output).
inline bool run_onnxruntime(const std::string& path, const serving::NamedTensors& inputs,
                            const ScratchDir& dir, nlohmann::json& outputs) {
  auto found = run_program("sh " + shell_quote(source_path("tests/export/find_onnxruntime.sh")) +
                               " " + shell_quote(EST_NPM_DIR),
                           400);
  if (found.exit_code != 0) {
    skip("onnxruntime-node: " + found.output);
    return false;
  }
  std::string node_modules = found.output.substr(0, found.output.find_last_not_of('\n') + 1);
  node_modules = node_modules.substr(node_modules.find_last_of('\n') + 1);
  nlohmann::json feeds;
  for (const auto& [name, tensor] : inputs) {
    if (tensor.dtype() == DType::kString)
      feeds[name] = {
          {"dtype", "string"}, {"dims", tensor.shape()}, {"data", tensor.to_vector<std::string>()}};
    else if (tensor.dtype() == DType::kI64)
      feeds[name] = {
          {"dtype", "int64"}, {"dims", tensor.shape()}, {"data", tensor.to_vector<int64_t>()}};
    else
      feeds[name] = {
          {"dtype", "float32"}, {"dims", tensor.shape()}, {"data", tensor.to_vector<float>()}};
  }
  std::ofstream(dir / "inputs.json") << feeds.dump();
  auto ran = run_program("env NODE_PATH=" + shell_quote(node_modules) + " node " +
                         shell_quote(source_path("tests/export/run_onnxruntime.js")) + " " +
                         shell_quote(path) + " " + shell_quote(dir / "inputs.json") + " " +
                         shell_quote(dir / "outputs.json"));
  if (ran.exit_code == 3) {
    skip(ran.output);
    return false;
  }
  INFO(ran.output);
  REQUIRE(ran.exit_code == 0);
  outputs = nlohmann::json::parse(std::ifstream(dir / "outputs.json"));
  return true;
}

// CHECKs that onnxruntime's output `values` equals est's `expected` within 1e-5 (relative).
inline void check_close(const nlohmann::json& values, const Tensor& expected) {
  CHECK(values["dims"].get<std::vector<int64_t>>() == expected.shape());
  std::vector<double> theirs = values["data"].get<std::vector<double>>();
  std::vector<double> ours = expected.to_vector<double>();
  REQUIRE(theirs.size() == ours.size());
  for (size_t i = 0; i < ours.size(); ++i)
    CHECK(theirs[i] == doctest::Approx(ours[i]).epsilon(1e-5));
}

}  // namespace est::testing
