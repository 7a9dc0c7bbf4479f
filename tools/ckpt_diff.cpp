// est-ckpt diff: two checkpoints (est's or TensorFlow's, either side) compared tensor by tensor.
// Exit statuses as GNU diff's: 0 the same, 1 different, 2 trouble (usage, unreadable input).
#include "tools/ckpt_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "checkpoint/source.h"
#include "ops/error.h"

namespace est::tools {
namespace {

using checkpoint::CheckpointSource;
using ops::Tensor;

std::string describe(const Tensor& value) {
  return fmt::format("{} {}", ops::dtype_name(value.dtype()), ops::shape_str(value.shape()));
}

struct ValueDiff {
  int64_t differing = 0;
  double max_abs = 0;  // over numeric elements that differ; infinite where one side is NaN
};

// Elements compared in place (same dtype and shape): strings and bools by equality, numbers
// as doubles, NaN equal to NaN.
ValueDiff compare_values(const Tensor& a, const Tensor& b) {
  ValueDiff diff;
  if (ops::is_string(a.dtype())) {
    const std::string* x = a.data<std::string>();
    const std::string* y = b.data<std::string>();
    for (int64_t i = 0; i < a.numel(); ++i) diff.differing += x[i] != y[i];
    return diff;
  }
  ops::dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.raw_data());
    const T* y = static_cast<const T*>(b.raw_data());
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double u = static_cast<double>(x[i]), v = static_cast<double>(y[i]);
      if (u == v || (std::isnan(u) && std::isnan(v))) continue;
      ++diff.differing;
      const double gap = std::isnan(u) || std::isnan(v) ? INFINITY : std::fabs(u - v);
      diff.max_abs = std::max(diff.max_abs, gap);
    }
  });
  return diff;
}

}  // namespace

int diff_checkpoints(const std::string& a_path, const std::string& b_path, std::FILE* out) {
  std::unique_ptr<CheckpointSource> a = checkpoint::open_checkpoint(a_path);
  std::unique_ptr<CheckpointSource> b = checkpoint::open_checkpoint(b_path);
  std::vector<std::string> a_names = a->names(), b_names = b->names();
  std::set<std::string> names(a_names.begin(), a_names.end());
  names.insert(b_names.begin(), b_names.end());
  int only_a = 0, only_b = 0, layout = 0, values = 0, same = 0;
  for (const std::string& name : names) {
    const bool in_a = a->contains(name), in_b = b->contains(name);
    if (!in_b) {
      fmt::print(out, "< {}  {}  (only in A)\n", name, describe(a->read(name)));
      ++only_a;
      continue;
    }
    if (!in_a) {
      fmt::print(out, "> {}  {}  (only in B)\n", name, describe(b->read(name)));
      ++only_b;
      continue;
    }
    const Tensor x = a->read(name), y = b->read(name);
    if (x.dtype() != y.dtype() || x.shape() != y.shape()) {
      fmt::print(out, "! {}  {} in A, {} in B\n", name, describe(x), describe(y));
      ++layout;
      continue;
    }
    const ValueDiff diff = compare_values(x, y);
    if (diff.differing == 0) {
      ++same;
      continue;
    }
    ++values;
    std::string gap = ops::is_string(x.dtype()) || x.dtype() == ops::DType::kBool
                          ? std::string()
                          : fmt::format(", max abs difference {:.9g}", diff.max_abs);
    fmt::print(out, "~ {}  {}: {} of {} values differ{}\n", name, describe(x), diff.differing,
               x.numel(), gap);
  }
  const bool equal = only_a + only_b + layout + values == 0;
  fmt::print(out,
             "A: {}\nB: {}\n{} tensor(s) equal, {} only in A, {} only in B, {} of another dtype "
             "or shape, {} with other values: {}\n",
             a->path(), b->path(), same, only_a, only_b, layout, values,
             equal ? "the same" : "different");
  return equal ? 0 : 1;
}

int diff_main(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print(
          "usage: est-ckpt diff A B\n"
          "Compares two checkpoints (est's or TensorFlow's, a file, prefix or model "
          "directory)\ntensor by tensor. Lines: '< name' only in A, '> name' only in B, "
          "'! name' another\ndtype or shape, '~ name' other values. Exit status 0 the "
          "same, 1 different, 2 trouble.\n");
      return 0;
    }
    paths.push_back(arg);
  }
  if (paths.size() != 2) {
    fmt::print(stderr,
               "est-ckpt diff: give two checkpoints, A and B ({} given); usage: est-ckpt "
               "diff A B\n",
               paths.size());
    return 2;
  }
  try {
    return diff_checkpoints(paths[0], paths[1], stdout);
  } catch (const Error& error) {
    fmt::print(stderr, "est-ckpt diff: {}: {}\n", status_code_name(error.code()), error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "est-ckpt diff: {}\n", error.what());
    return 2;
  }
}

}  // namespace est::tools
