// Helpers for the data/ tests: a scratch directory per test process, draining a dataset, and
// the shared error helpers (tests/ops/expect_error.h).
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/state.h"
#include "tests/ops/expect_error.h"  // error_message<E>(fn), contains(text, part)

namespace est::testing {

// A directory that exists for the life of the process and is removed at exit.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      path =
          std::filesystem::temp_directory_path() / ("est_data_test_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

inline std::string scratch_file(const std::string& name) { return (scratch_dir() / name).string(); }

// Every element of the dataset.
inline std::vector<data::Element> drain(data::Iterator& it) {
  std::vector<data::Element> out;
  while (auto element = it.next()) out.push_back(std::move(*element));
  return out;
}
inline std::vector<data::Element> drain(const data::Dataset& ds) {
  auto it = ds.iterator();
  return drain(it);
}

// The values of int64 scalar (or any) single-tensor elements, flattened in order.
inline std::vector<int64_t> values_of(const std::vector<data::Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    for (int64_t v : e.value.to_vector<int64_t>()) out.push_back(v);
  return out;
}
inline std::vector<int64_t> values_of(const data::Dataset& ds) { return values_of(drain(ds)); }

inline std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

inline std::vector<std::string> serialized(const std::vector<data::Element>& elements) {
  std::vector<std::string> out;
  for (const auto& e : elements) out.push_back(data::serialize_element(e));
  return out;
}

// For each cut point k: read k elements and save; the saving iterator's remaining elements, a
// fresh iterator's after restore_state, and an uninterrupted iterator's after k must be equal
// (byte for byte). The end of the stream is always one of the cuts.
inline void check_resume(const data::Dataset& ds, std::vector<int64_t> cuts) {
  auto full = serialized(drain(ds));
  REQUIRE(!full.empty());
  cuts.push_back(static_cast<int64_t>(full.size()));
  for (int64_t cut : cuts) {
    if (cut > static_cast<int64_t>(full.size())) continue;
    CAPTURE(cut);
    auto it = ds.iterator();
    for (int64_t i = 0; i < cut; ++i) REQUIRE(it.next());
    std::string state = it.save_state();
    auto rest = serialized(drain(it));
    auto restored = ds.iterator();
    restored.restore_state(state);
    auto resumed = serialized(drain(restored));
    std::vector<std::string> expected(full.begin() + cut, full.end());
    CHECK(rest == expected);
    CHECK(resumed == expected);
  }
}

}  // namespace est::testing
