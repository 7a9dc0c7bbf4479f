// Reading TensorBoard event files back: our own reader, for tests and for the Estimator itself
// (early stopping reads evaluation metrics from model_dir/eval). Both CRCs of every record are
// verified; a corrupt or truncated record is a DataLossError naming the file and the record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/summary_encoding.h"

namespace est {

// One scalar summary value.
struct ScalarEvent {
  double wall_time;  // seconds since the epoch
  int64_t step;
  std::string tag;
  double value;  // the stored float32, widened
};

// Every simple_value of every Event in the file, in file order (an Event with several values
// gives several entries; events without a summary, such as the file_version record, give none).
std::vector<ScalarEvent> read_events(const std::string& path);

// The file_version of the file's first record ("brain.Event:2"); DataLossError when the file is
// empty or its first record is not a file_version event.
std::string read_file_version(const std::string& path);

// One summary value of any kind this project writes.
struct SummaryEvent {
  enum class Kind { kScalar, kHistogram, kImage, kText, kOther };
  double wall_time;
  int64_t step;
  std::string tag;
  Kind kind;
  double scalar = 0;         // kScalar
  Histogram histogram;       // kHistogram
  int64_t image_height = 0;  // kImage, with image_width, image_colorspace and the PNG bytes
  int64_t image_width = 0;
  int image_colorspace = 0;
  std::string image_png;
  std::string text;         // kText: the string tensor's first element
  std::string plugin_name;  // the value's metadata, when it has one
};

// Every summary value of every Event in the file, in file order.
std::vector<SummaryEvent> read_summaries(const std::string& path);

// The event files of a directory (names starting "events.out.tfevents."), sorted by name, which
// is creation order; empty when the directory does not exist.
std::vector<std::string> event_files(const std::string& logdir);

}  // namespace est
