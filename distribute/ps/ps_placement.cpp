// PsPlacement: round-robin and greedy placement, and the two partitioners.
#include "distribute/ps/ps_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ops/error.h"

namespace est::distribute {
namespace {

constexpr const char* kGlobalStep = "global_step";

int64_t element_bytes(ops::DType dtype, int64_t bytes_per_string_element) {
  return ops::is_string(dtype) ? bytes_per_string_element
                               : static_cast<int64_t>(ops::dtype_size(dtype));
}

int64_t elements(const ops::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Partitioner fixed_size_partitioner(int64_t num_shards) {
  if (num_shards < 1)
    throw InvalidArgumentError(
        fmt::format("fixed_size_partitioner: num_shards must be at least 1, got {}", num_shards));
  return [num_shards](const std::string&, const ops::Shape& shape, ops::DType) {
    return std::min(num_shards, shape.empty() ? int64_t{1} : shape[0]);
  };
}

Partitioner min_max_variable_partitioner(int64_t max_partitions, int64_t min_slice_size,
                                         int64_t bytes_per_string_element) {
  if (max_partitions < 0)
    throw InvalidArgumentError(fmt::format(
        "min_max_variable_partitioner: max_partitions must be >= 0, got {}", max_partitions));
  if (min_slice_size <= 0 || bytes_per_string_element <= 0)
    throw InvalidArgumentError(fmt::format(
        "min_max_variable_partitioner: min_slice_size ({}) and bytes_per_string_element ({}) "
        "must be positive",
        min_slice_size, bytes_per_string_element));
  return [=](const std::string&, const ops::Shape& shape, ops::DType dtype) -> int64_t {
    if (shape.empty() || shape[0] == 0) return 1;
    // Bytes of one row (a slice along axis 0); rows per part so that a part is at least
    // min_slice_size; parts that many rows need.
    double row_bytes = static_cast<double>(elements(shape) / shape[0]) *
                       static_cast<double>(element_bytes(dtype, bytes_per_string_element));
    int64_t rows_per_part =
        std::max<int64_t>(1, static_cast<int64_t>(std::floor(min_slice_size / row_bytes)));
    int64_t parts = (shape[0] + rows_per_part - 1) / rows_per_part;
    if (max_partitions > 0) parts = std::min(parts, max_partitions);
    return parts;
  };
}

PsPlacement::PsPlacement(int num_ps, PsLoadBalancing balancing, Partitioner partitioner)
    : num_ps_(num_ps), balancing_(balancing), partitioner_(std::move(partitioner)) {
  if (num_ps < 1)
    throw InvalidArgumentError(fmt::format(
        "PsPlacement: a parameter-server job needs at least one ps task, got {}", num_ps));
  loads_.assign(static_cast<size_t>(num_ps), 0);
}

int PsPlacement::next_ps(int64_t bytes) {
  int chosen = 0;
  if (balancing_ == PsLoadBalancing::kRoundRobin) {
    chosen = next_;
    next_ = (next_ + 1) % num_ps_;
  } else {
    // The least loaded task; ties go to the lowest index (numpy's argmin).
    chosen = static_cast<int>(std::min_element(loads_.begin(), loads_.end()) - loads_.begin());
  }
  loads_[static_cast<size_t>(chosen)] += bytes;
  return chosen;
}

const PsVariable& PsPlacement::place(const std::string& name, const ops::Shape& shape,
                                     ops::DType dtype) {
  if (const PsVariable* placed = find(name)) {
    if (placed->shape != shape || placed->dtype != dtype)
      throw InvalidArgumentError(fmt::format(
          "PsPlacement: variable '{}' was placed as {} [{}] and is now {} [{}]; every worker "
          "must create its variables with the same shapes",
          name, ops::dtype_name(placed->dtype), fmt::join(placed->shape, ", "),
          ops::dtype_name(dtype), fmt::join(shape, ", ")));
    return *placed;
  }
  PsVariable variable{.name = name, .shape = shape, .dtype = dtype, .shards = {}};
  int64_t rows = shape.empty() ? 1 : shape[0];
  int64_t parts = 1;
  if (partitioner_ && !shape.empty() && name != kGlobalStep) {
    parts = partitioner_(name, shape, dtype);
    if (parts < 1 || parts > rows)
      throw InvalidArgumentError(fmt::format(
          "PsPlacement: the partitioner cut variable '{}' (axis 0 of {} rows) into {} parts; "
          "return between 1 and the number of rows",
          name, rows, parts));
  }
  int64_t row_bytes = rows == 0 ? 0 : elements(shape) / rows * element_bytes(dtype, 16);
  int64_t begin = 0;
  for (int64_t i = 0; i < parts; ++i) {
    int64_t length = rows / parts + (i < rows % parts ? 1 : 0);
    PsShard shard{.ps = 0,
                  .name = parts == 1 ? name : fmt::format("{}/part_{}", name, i),
                  .row_begin = begin,
                  .row_end = begin + length};
    int64_t bytes = shape.empty() ? element_bytes(dtype, 16) : length * row_bytes;
    if (name == kGlobalStep) {
      // On ps 0, and counted as TF counts the Estimator's first variable.
      shard.ps = next_ps(bytes);
      if (shard.ps != 0) {
        loads_[static_cast<size_t>(shard.ps)] -= bytes;
        loads_[0] += bytes;
        shard.ps = 0;
      }
    } else {
      shard.ps = next_ps(bytes);
    }
    variable.shards.push_back(std::move(shard));
    begin += length;
  }
  index_[name] = variables_.size();
  variables_.push_back(std::move(variable));
  return variables_.back();
}

const PsVariable* PsPlacement::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &variables_[it->second];
}

std::string describe(const PsVariable& variable) {
  std::string text;
  for (const PsShard& shard : variable.shards) {
    if (!text.empty()) text += ", ";
    text += fmt::format("ps {} holds {}", shard.ps, shard.name);
    if (variable.partitioned())
      text += fmt::format(" (rows {}-{})", shard.row_begin, shard.row_end - 1);
  }
  return text;
}

}  // namespace est::distribute
