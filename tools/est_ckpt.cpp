// est-ckpt: inspect and verify checkpoints from the command line.
//
//   est-ckpt PATH              every tensor: name, kind, dtype, shape, crc32, min/max/mean
//   est-ckpt PATH NAME [--all] one tensor's values (the first 100 unless --all), each printed
//                              so that it parses back to the same value
//   est-ckpt diff A B          two checkpoints compared (tools/ckpt_diff.h); exit 0 the same,
//                              1 different, 2 trouble
//   est-ckpt --verify PATH     every checkpoint of a directory (or one file) against its
//                              checksums (TensorFlow prefixes its state file lists too); exit
//                              status 1 when any is damaged
//   est-ckpt convert SRC DST --to tf|est
//                              est's checkpoint into TensorFlow's V2 format and back
//                              (tools/est_ckpt_convert.cpp)
//   est-ckpt --help            the above; a usage error names the flag and exits 2
//
// PATH is a checkpoint file or a model directory (its latest checkpoint). A TensorFlow V2
// checkpoint (a prefix such as model.ckpt-1000, a directory whose state file names one, or a
// SavedModel directory) is listed as TensorFlow's inspect_checkpoint lists it:
// `name (DT_FLOAT) [2,3]`, one tensor a line, sorted by name (a TF2 checkpoint's keys, then
// `# name -> key` for the variables' names it is also read by), and prints a tensor of it as
// est's. Everything read is
// checked against the stored CRC-32, so listing a damaged file shows which tensors are bad.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/file_util.h"
#include "checkpoint/source.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_object_graph.h"
#include "checkpoint/tf_resume.h"
#include "tools/ckpt_diff.h"
#include "tools/est_ckpt_convert.h"

namespace {

using namespace est;
using namespace est::checkpoint;

constexpr const char* kUsage =
    "usage: est-ckpt PATH               list tensors (shape, dtype, crc32, min/max/mean)\n"
    "       est-ckpt PATH NAME [--all]  print one tensor (first 100 values unless --all)\n"
    "       est-ckpt --verify PATH      verify every checkpoint of a directory or one file\n"
    "       est-ckpt diff A B           compare two checkpoints (exit 0 same, 1 different)\n"
    "       est-ckpt convert SRC DST --to tf|est  convert to TensorFlow's format or back\n"
    "PATH is a checkpoint file (model.ckpt-200.h5) or a model directory (its latest);\n"
    "a TensorFlow checkpoint prefix (model.ckpt-1000) or SavedModel directory is listed\n"
    "as TensorFlow's inspect_checkpoint does: name (DT_FLOAT) [2,3].";

struct Stats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double mean = 0;
  int64_t nan = 0;
};

Stats statistics(const Tensor& tensor) {
  Stats stats;
  double sum = 0;
  int64_t counted = 0;
  ops::dispatch_dtype(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* values = static_cast<const T*>(tensor.raw_data());
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      double v = static_cast<double>(values[i]);
      if (std::isnan(v)) {
        ++stats.nan;
        continue;
      }
      stats.min = std::min(stats.min, v);
      stats.max = std::max(stats.max, v);
      sum += v;
      ++counted;
    }
  });
  stats.mean = counted ? sum / static_cast<double>(counted) : std::nan("");
  return stats;
}

std::string kind_name(EntryKind kind) { return kind == EntryKind::kVariable ? "variable" : "slot"; }

int list(const std::string& path) {
  CheckpointInfo info = read_info(path);
  fmt::print("{}\n  global_step {}  format {}  written by est {} at {}\n", info.path,
             info.global_step, info.format_version, info.framework_version, info.creation_time);
  size_t width = 4;
  for (const TensorInfo& tensor : info.tensors) width = std::max(width, tensor.name.size());
  fmt::print("  {:<{}}  {:<8}  {:<7}  {:<16}  {:<8}  {:>12}  {:>12}  {:>12}\n", "name", width,
             "kind", "dtype", "shape", "crc32", "min", "max", "mean");
  int damaged = 0;
  size_t bytes = 0;
  for (const TensorInfo& tensor : info.tensors) {
    std::string head = fmt::format("  {:<{}}  {:<8}  {:<7}  {:<16}  {:08x}", tensor.name, width,
                                   kind_name(tensor.kind), ops::dtype_name(tensor.dtype),
                                   ops::shape_str(tensor.shape), tensor.crc32);
    try {
      Tensor value = load_variable(info.path, tensor.name);
      bytes += value.nbytes();
      Stats stats = statistics(value);
      fmt::print("{}  {:>12.6g}  {:>12.6g}  {:>12.6g}{}\n", head, stats.min, stats.max, stats.mean,
                 stats.nan ? fmt::format("  ({} NaN)", stats.nan) : "");
    } catch (const DataLossError& error) {
      ++damaged;
      fmt::print("{}  DAMAGED: {}\n", head, error.what());
    }
  }
  for (const BlobInfo& blob : info.blobs)
    fmt::print("  {:<{}}  {:<8}  {} bytes  crc32 {:08x}\n", blob.name, width, "blob", blob.bytes,
               blob.crc32);
  fmt::print("  {} tensors, {:.2f} MB{}\n", info.tensors.size(), static_cast<double>(bytes) / 1e6,
             damaged ? fmt::format(", {} DAMAGED", damaged) : "");
  return damaged ? 1 : 0;
}

// TensorFlow's inspect_checkpoint output for a V2 checkpoint (BundleReader::DebugString, with
// TensorShape::DebugString's "[2,3]"), partitioned variables shown whole as
// tf.train.list_variables shows them.
int list_tf(const std::string& path) {
  for (const TfTensorInfo& tensor : tf_list_variables(path)) {
    std::string dims;
    for (size_t d = 0; d < tensor.shape.size(); ++d)
      dims += fmt::format("{}{}", d ? "," : "", tensor.shape[d]);
    fmt::print("{} ({}) [{}]\n", tensor.name, tensor.dtype_enum, dims);
  }
  // A TF2 object-based checkpoint: the names its variables are also read by (tf_object_graph.h).
  auto names = tf_object_graph_names(TfBundleReader(path));
  if (!names.empty()) fmt::print("# variables by name (the object graph's full names):\n");
  for (const auto& [name, key] : names) fmt::print("# {} -> {}\n", name, key);
  return 0;
}

// Element i as text that parses back to the same value: 9 significant digits for float32 (and
// bfloat16, exact as a float32), 17 for float64 (the digits that round-trip any value of the
// type, std::numeric_limits<T>::max_digits10), integers as integers, bools as true/false and
// strings quoted with C escapes.
std::string element_text(const Tensor& tensor, int64_t i) {
  switch (tensor.dtype()) {
    case DType::kF32:
      return fmt::format("{:.9g}", tensor.data<float>()[i]);
    case DType::kBF16:
      return fmt::format("{:.9g}", static_cast<float>(tensor.data<ops::bfloat16>()[i]));
    case DType::kF64:
      return fmt::format("{:.17g}", tensor.data<double>()[i]);
    case DType::kI32:
      return fmt::format("{}", tensor.data<int32_t>()[i]);
    case DType::kI64:
      return fmt::format("{}", tensor.data<int64_t>()[i]);
    case DType::kU8:
      return fmt::format("{}", tensor.data<uint8_t>()[i]);
    case DType::kBool:
      return tensor.data<bool>()[i] ? "true" : "false";
    case DType::kString:
      return fmt::format("{:?}", tensor.data<std::string>()[i]);
  }
  return "?";
}

int show(const std::string& path, const std::string& name, bool all) {
  Tensor value = open_checkpoint(path)->read(name);  // est's checkpoint or TensorFlow's
  std::string header =
      fmt::format("{} {} {}", name, ops::dtype_name(value.dtype()), ops::shape_str(value.shape()));
  if (!ops::is_string(value.dtype())) {
    Stats stats = statistics(value);
    header += fmt::format("  min {:.6g} max {:.6g} mean {:.6g}", stats.min, stats.max, stats.mean);
  }
  fmt::print("{}\n", header);
  const int64_t shown = all ? value.numel() : std::min<int64_t>(value.numel(), 100);
  const int64_t row = value.rank() > 0 ? std::max<int64_t>(value.dim(-1), 1) : 1;
  for (int64_t i = 0; i < shown; ++i)
    fmt::print("{}{}", element_text(value, i), (i + 1) % row == 0 || i + 1 == shown ? "\n" : " ");
  if (shown < value.numel())
    fmt::print("... {} more values (--all prints them)\n", value.numel() - shown);
  return 0;
}

// Step of "model.ckpt-200.h5" for sorting; -1 for other names.
int64_t step_of(const std::string& file_name) {
  size_t dash = file_name.rfind('-');
  if (dash == std::string::npos || !file_name.ends_with(".h5")) return -1;
  std::string digits = file_name.substr(dash + 1, file_name.size() - dash - 4);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

int verify_all(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) {
    verify(path);
    fmt::print("OK       {}\n", path);
    return 0;
  }
  int bad = 0;
  std::optional<CheckpointState> state;
  try {
    state = read_checkpoint_state(path);
  } catch (const Error& error) {
    fmt::print("DAMAGED  {} (the state file): {}\n", kStateFileName, error.what());
    ++bad;
  }
  std::map<std::string, bool> listed;    // file name -> listed in the state file
  std::vector<std::string> tf_prefixes;  // TensorFlow checkpoints the state file lists
  if (state) {
    fmt::print("state file: latest {}, {} kept\n", state->model_checkpoint_path,
               state->all_model_checkpoint_paths.size());
    for (const std::string& stored : state->all_model_checkpoint_paths) {
      std::string resolved = est_checkpoint_path(path, stored);
      if (!fs::exists(resolved)) {
        // A TensorFlow prefix (a TF1 job's model_dir, which est resumes from): verified below.
        fs::path prefix =
            fs::path(stored).is_absolute() ? fs::path(stored) : fs::path(path) / stored;
        if (is_tf_prefix(prefix.string())) {
          tf_prefixes.push_back(prefix.string());
          continue;
        }
        fmt::print("MISSING  {} (listed in the state file)\n", stored);
        ++bad;
      }
      listed[fs::path(resolved).filename().string()] = true;
    }
  } else if (bad == 0) {
    fmt::print("state file: none\n");
  }
  std::vector<std::pair<int64_t, std::string>> files;
  for (const auto& entry : fs::directory_iterator(path)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;
    if (is_temporary_name(name)) {
      std::optional<int> owner = temporary_owner(name);
      if (!owner)
        fmt::print("TEMP     {} (a temporary file; delete it when no save is running)\n", name);
      else if (process_alive(*owner))
        fmt::print("TEMP     {} (a save in progress: process {} is running)\n", name, *owner);
      else
        fmt::print("TEMP     {} (left by an interrupted save of process {}; safe to delete)\n",
                   name, *owner);
    } else if (name.ends_with(".h5")) {
      files.emplace_back(step_of(name), name);
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& [step, name] : files) {
    std::string note = listed.count(name) ? "" : " (not in the state file)";
    try {
      verify((fs::path(path) / name).string());
      fmt::print("OK       {}{}\n", name, note);
    } catch (const std::exception& error) {  // est::Error, or anything a damaged file causes
      fmt::print("DAMAGED  {}{}: {}\n", name, note, error.what());
      ++bad;
    }
  }
  for (const std::string& prefix : tf_prefixes) {
    const std::string name = fs::path(prefix).filename().string();
    try {
      std::unique_ptr<CheckpointSource> source = open_checkpoint(prefix);
      for (const std::string& tensor : source->names()) source->read(tensor);  // CRCs checked
      fmt::print("OK       {} (TensorFlow checkpoint)\n", name);
    } catch (const std::exception& error) {
      fmt::print("DAMAGED  {} (TensorFlow checkpoint): {}\n", name, error.what());
      ++bad;
    }
  }
  fmt::print("{} checkpoint(s), {} problem(s)\n", files.size() + tf_prefixes.size(), bad);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "diff") return est::tools::diff_main(argc - 1, argv + 1);
  if (argc > 1 && std::string_view(argv[1]) == "convert")
    return est::tools::convert_main(argc - 1, argv + 1);
  bool all = false, verify_mode = false;
  std::string path, name;
  CLI::App app("est-ckpt: inspect and verify checkpoints.", "est-ckpt");
  app.footer(kUsage);
  app.add_option("PATH", path, "a checkpoint file, or a model directory (its latest)")->required();
  app.add_option("NAME", name, "a tensor to print");
  app.add_flag("--all", all, "print every value of NAME, not the first 100");
  app.add_flag("--verify", verify_mode, "verify every checkpoint of PATH against its checksums")
      ->excludes("NAME");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help prints the help and exits 0; a usage error names the flag and exits 2.
    int status = app.exit(error);
    return status == 0 ? 0 : 2;
  }
  try {
    if (verify_mode) return verify_all(path);
    if (!name.empty()) return show(path, name, all);
    // A model directory saved with RunConfig::tf_checkpoint_format has both: est's is listed.
    const bool est_directory = std::filesystem::is_directory(path) && latest_checkpoint(path);
    if (is_tf_checkpoint(path) && !est_directory) return list_tf(path);
    return list(path);
  } catch (const est::Error& error) {
    fmt::print(stderr, "est-ckpt: {}: {}\n", est::status_code_name(error.code()), error.what());
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "est-ckpt: {}\n", error.what());
    return 1;
  }
}
