// SummaryWriter: Event protos, TFRecord framing (data/tfrecord.h), TF's flush policy.
#include "estimator/summary_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "data/tfrecord.h"
#include "estimator/summary_encoding.h"
#include "event.pb.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

constexpr const char* kFileVersion = "brain.Event:2";

double system_seconds() {
  auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// events.out.tfevents.<seconds>.<host>, with ".1", ".2", ... when a file of that name exists.
std::string unused_event_file(const std::filesystem::path& logdir, double seconds) {
  std::string base = fmt::format("events.out.tfevents.{:010d}.{}",
                                 static_cast<long long>(std::floor(seconds)), hostname());
  std::filesystem::path path = logdir / base;
  std::error_code error;
  for (int suffix = 1; std::filesystem::exists(path, error); ++suffix)
    path = logdir / fmt::format("{}.{}", base, suffix);
  return path.string();
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& logdir, SummaryWriterOptions options)
    : options_(std::move(options)), logdir_(logdir) {
  if (logdir.empty())
    throw InvalidArgumentError(
        "SummaryWriter: the log directory is empty; pass the directory for the event files "
        "(e.g. model_dir or model_dir/eval)");
  std::error_code error;
  std::filesystem::create_directories(logdir, error);
  if (error) {
    std::string message = fmt::format(
        "SummaryWriter: cannot create log directory {}: {}; choose a writable directory", logdir,
        error.message());
    if (error == std::errc::permission_denied) throw PermissionDeniedError(message);
    throw FailedPreconditionError(message);
  }
  double start = now();
  path_ = unused_event_file(logdir, start);
  writer_ = std::make_unique<data::TFRecordWriter>(path_);

  estimator::proto::Event event;
  event.set_wall_time(start);
  event.set_step(0);
  event.set_file_version(kFileVersion);
  std::lock_guard lock(mutex_);
  write_event(event.SerializeAsString());
  flush_locked();  // the file is valid (and visible to TensorBoard) from the start
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    log::error("SummaryWriter: closing {} failed: {}", path_, e.what());
  }
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  estimator::proto::Event event;
  event.set_wall_time(now());
  event.set_step(step);
  estimator::proto::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  summary_value->set_simple_value(static_cast<float>(value));
  append(event.SerializeAsString(), "add_scalar", tag);
}

void SummaryWriter::add_histogram(const std::string& tag, const std::vector<double>& values,
                                  int64_t step) {
  const Histogram histogram = histogram_of(values, tag);
  estimator::proto::Event event;
  event.set_wall_time(now());
  event.set_step(step);
  estimator::proto::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  estimator::proto::HistogramProto* proto = summary_value->mutable_histo();
  proto->set_min(histogram.min);
  proto->set_max(histogram.max);
  proto->set_num(histogram.num);
  proto->set_sum(histogram.sum);
  proto->set_sum_squares(histogram.sum_squares);
  for (double limit : histogram.bucket_limit) proto->add_bucket_limit(limit);
  for (double count : histogram.bucket) proto->add_bucket(count);
  append(event.SerializeAsString(), "add_histogram", tag);
}

void SummaryWriter::add_image(const std::string& tag, const std::vector<uint8_t>& pixels,
                              int64_t height, int64_t width, int channels, int64_t step) {
  estimator::proto::Event event;
  event.set_wall_time(now());
  event.set_step(step);
  estimator::proto::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  estimator::proto::Summary::Image* image = summary_value->mutable_image();
  image->set_height(static_cast<int32_t>(height));
  image->set_width(static_cast<int32_t>(width));
  image->set_colorspace(channels);
  image->set_encoded_image_string(encode_png(pixels, height, width, channels));
  append(event.SerializeAsString(), "add_image", tag);
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  constexpr int kDtString = 7;  // TensorFlow's DT_STRING
  estimator::proto::Event event;
  event.set_wall_time(now());
  event.set_step(step);
  estimator::proto::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  summary_value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  estimator::proto::TensorProto* tensor = summary_value->mutable_tensor();
  tensor->set_dtype(kDtString);
  tensor->mutable_tensor_shape();  // a scalar: present, no dimensions
  tensor->add_string_val(text);
  append(event.SerializeAsString(), "add_text", tag);
}

void SummaryWriter::append(const std::string& serialized, const char* what,
                           const std::string& tag) {
  std::lock_guard lock(mutex_);
  if (!writer_)
    throw FailedPreconditionError(fmt::format(
        "SummaryWriter: {}('{}') after close() of {}; open a new writer", what, tag, path_));
  write_event(serialized);
  if (pending_ >= options_.max_queue || now() - last_flush_ >= options_.flush_secs) flush_locked();
}

void SummaryWriter::flush() {
  std::lock_guard lock(mutex_);
  if (writer_) flush_locked();
}

void SummaryWriter::close() {
  std::lock_guard lock(mutex_);
  if (!writer_) return;
  std::unique_ptr<data::TFRecordWriter> writer = std::move(writer_);
  writer->close();
}

void SummaryWriter::write_event(const std::string& serialized) {
  writer_->write(serialized);
  ++pending_;
}

void SummaryWriter::flush_locked() {
  writer_->flush();
  pending_ = 0;
  last_flush_ = now();
}

double SummaryWriter::now() const { return options_.clock ? options_.clock() : system_seconds(); }

}  // namespace est
