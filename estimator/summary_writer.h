// SummaryWriter: summaries into a TensorBoard event file, like tf.compat.v1.summary.FileWriter:
// scalars, histograms (HistogramProto over TF's default buckets), images (PNG in
// Summary.Image) and text (a string tensor for TensorBoard's text plugin).
//
// The file is `<logdir>/events.out.tfevents.<unix seconds, 10 digits>.<hostname>`; each record is
// a TFRecord-framed `Event` proto (estimator/proto/event.proto), the first one carrying
// file_version "brain.Event:2". As TensorFlow's writer, events are buffered and handed to the OS
// every `max_queue` events or `flush_secs` seconds, on flush(), and when the writer is
// destroyed. One writer per directory per process: the Estimator shares them through
// estimator/summary_cache.h. All members are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace est {

namespace data {
class TFRecordWriter;
}

struct SummaryWriterOptions {
  int max_queue = 10;       // events buffered before a flush (TF's FileWriter default)
  double flush_secs = 120;  // ... or seconds since the last flush
  // Seconds since the epoch for wall_time and the file name; the system clock when empty
  // (tests pass a fixed clock).
  std::function<double()> clock;
};

class SummaryWriter {
 public:
  // Creates `logdir` (and parents) if needed, then the event file with its file_version record.
  // If a file of that name exists (another writer in the same second), ".1", ".2", ... is
  // appended rather than overwriting it. Errors name the directory.
  explicit SummaryWriter(const std::string& logdir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // flushes and closes; errors at this point are logged, not thrown
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // One Event with one simple_value (stored as float32, as TensorFlow does).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // One Event with a HistogramProto of `values` (see summary_encoding.h); NaN or infinity is an
  // InvalidArgumentError naming the tag.
  void add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step);
  // One Event with a Summary.Image: `pixels` row-major [height, width, channels], channels 1
  // (grayscale), 2 (+ alpha), 3 (RGB) or 4 (RGBA), PNG-encoded.
  void add_image(const std::string& tag, const std::vector<uint8_t>& pixels, int64_t height,
                 int64_t width, int channels, int64_t step);
  // One Event with a scalar string tensor and plugin metadata "text", as tf.summary.text.
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  // Hands buffered events to the OS.
  void flush();
  // Flushes and closes; later add_scalar calls are a FailedPreconditionError.
  void close();

  const std::string& path() const { return path_; }  // the event file
  const std::string& logdir() const { return logdir_; }

 private:
  // Writes a serialized Event, flushing by the queue and clock policy; `what` and `tag` name it
  // in the error after close().
  void append(const std::string& serialized, const char* what, const std::string& tag);
  void write_event(const std::string& serialized);  // under mutex_
  void flush_locked();
  double now() const;

  SummaryWriterOptions options_;
  std::string logdir_;
  std::string path_;
  std::mutex mutex_;
  std::unique_ptr<data::TFRecordWriter> writer_;  // null once closed
  int pending_ = 0;                               // events written since the last flush
  double last_flush_ = 0;                         // now() at the last flush
};

}  // namespace est
