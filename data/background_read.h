// BackgroundRead: a stream read into a tensor's rows by a thread of its own, for a source whose
// first rows are wanted before its whole file is decoded. Inflating Fashion-MNIST's 47 MB of
// gzipped training images took most of the time from start to the first training step, while
// a shuffle(10000) buffer needs the first 10000 rows only (issue 32, item 5).
//
// The thread reads row-aligned pieces straight into the tensor and publishes how many rows are
// complete. It keeps 1 MB ahead of the furthest row a reader asked for and then waits, so a
// first training step does not compete with inflating the rest of the file. `finish` (the reader's
// check of the end: a short file, bytes after the rows) runs before the last row is published, so a
// reader that reaches the end has seen the whole file checked. An error stops the thread; the rows
// before it stay readable, and wait_for() rethrows it for any row it did not reach. The stream is
// closed (its inflater's buffers freed) as soon as it is read; the destructor stops the thread and
// joins it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "data/file_stream.h"
#include "data/stages.h"

namespace est::data {

class BackgroundRead final : public ArrivingRows {
 public:
  // Bytes read between two publications: about 330 28x28 images, there after a quarter of a
  // megabyte is inflated (0.5 ms) rather than a whole one (rounded to whole rows, at least one).
  static constexpr size_t kPieceBytes = size_t{1} << 18;
  // How far the thread reads ahead of the furthest row asked for, then waits (plus the piece it
  // is reading): 1300 28x28 images, 20 batches of 64, enough to keep a training input fed
  // (inflating 1 MB takes about 2 ms). With 4 MB the thread was still inflating, and
  // first-touching, 4 MB past a filled shuffle(10000) buffer during the first training step, on
  // a 2-core machine the step's second core (issue 32, item 5).
  static constexpr size_t kAheadBytes = size_t{1} << 20;

  // `rows`: a CPU tensor [rows, ...] to fill with the stream's next nbytes() bytes.
  // `finish(stream, got)`: called with the bytes read (all of them, or fewer when the stream
  // ended early); it throws what is wrong with the file.
  using Finish = std::function<void(InputStream& stream, size_t got)>;
  BackgroundRead(std::unique_ptr<InputStream> stream, Tensor rows, Finish finish);
  ~BackgroundRead() override;
  BackgroundRead(const BackgroundRead&) = delete;
  BackgroundRead& operator=(const BackgroundRead&) = delete;

  int64_t wait_for(int64_t rows) const override;

 private:
  void run();
  void publish(int64_t rows);

  std::unique_ptr<InputStream> stream_;
  Tensor rows_;
  const int64_t total_rows_;
  Finish finish_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  int64_t ready_ = -1;  // complete rows; -1 until the first piece (an empty file: until checked)
  mutable int64_t wanted_ = 0;  // the most rows a reader asked for
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace est::data
