// Event files read back through data/tfrecord.h (which verifies both CRCs of each record) and
// the Event proto.
#include "estimator/event_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "data/tfrecord.h"
#include "event.pb.h"
#include "ops/error.h"

namespace est {
namespace {

// Calls fn(event, record_index) for each record of the file.
template <class Fn>
void for_each_event(const std::string& path, Fn&& fn) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw NotFoundError(fmt::format("read_events: no event file at {}", path));
  data::TFRecordReader reader(path);
  std::string record;
  estimator::proto::Event event;
  while (true) {
    int64_t index = reader.record_index();
    if (!reader.read(record)) break;
    if (!event.ParseFromString(record))
      throw DataLossError(fmt::format(
          "read_events: record {} of {} has valid checksums but is not an Event proto; the "
          "file is not a TensorBoard event file",
          index, path));
    if (!fn(event, index)) break;
  }
}

}  // namespace

std::vector<ScalarEvent> read_events(const std::string& path) {
  std::vector<ScalarEvent> out;
  for_each_event(path, [&](const estimator::proto::Event& event, int64_t) {
    if (event.has_summary()) {
      for (const auto& value : event.summary().value()) {
        if (value.has_simple_value())
          out.push_back({event.wall_time(), event.step(), value.tag(), value.simple_value()});
      }
    }
    return true;
  });
  return out;
}

std::vector<SummaryEvent> read_summaries(const std::string& path) {
  std::vector<SummaryEvent> out;
  for_each_event(path, [&](const estimator::proto::Event& event, int64_t) {
    if (!event.has_summary()) return true;
    for (const auto& value : event.summary().value()) {
      SummaryEvent entry{.wall_time = event.wall_time(),
                         .step = event.step(),
                         .tag = value.tag(),
                         .kind = SummaryEvent::Kind::kOther};
      if (value.has_metadata()) entry.plugin_name = value.metadata().plugin_data().plugin_name();
      if (value.has_simple_value()) {
        entry.kind = SummaryEvent::Kind::kScalar;
        entry.scalar = value.simple_value();
      } else if (value.has_histo()) {
        const auto& h = value.histo();
        entry.kind = SummaryEvent::Kind::kHistogram;
        entry.histogram = {.min = h.min(),
                           .max = h.max(),
                           .num = h.num(),
                           .sum = h.sum(),
                           .sum_squares = h.sum_squares(),
                           .bucket_limit = {h.bucket_limit().begin(), h.bucket_limit().end()},
                           .bucket = {h.bucket().begin(), h.bucket().end()}};
      } else if (value.has_image()) {
        entry.kind = SummaryEvent::Kind::kImage;
        entry.image_height = value.image().height();
        entry.image_width = value.image().width();
        entry.image_colorspace = value.image().colorspace();
        entry.image_png = value.image().encoded_image_string();
      } else if (value.has_tensor() && entry.plugin_name == "text") {
        entry.kind = SummaryEvent::Kind::kText;
        if (value.tensor().string_val_size() > 0) entry.text = value.tensor().string_val(0);
      }
      out.push_back(std::move(entry));
    }
    return true;
  });
  return out;
}

std::string read_file_version(const std::string& path) {
  std::string version;
  bool seen = false;
  for_each_event(path, [&](const estimator::proto::Event& event, int64_t) {
    seen = true;
    if (event.what_case() == estimator::proto::Event::kFileVersion) version = event.file_version();
    return false;  // the first record only
  });
  if (!seen) throw DataLossError(fmt::format("read_file_version: {} holds no record", path));
  if (version.empty())
    throw DataLossError(
        fmt::format("read_file_version: the first record of {} is not a file_version event", path));
  return version;
}

std::vector<std::string> event_files(const std::string& logdir) {
  std::vector<std::string> files;
  std::error_code error;
  if (!std::filesystem::is_directory(logdir, error)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(logdir, error)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace est
