// BackgroundRead: row-aligned pieces read on a thread, rows published as they complete.
#include "data/background_read.h"

#include <algorithm>

namespace est::data {

BackgroundRead::BackgroundRead(std::unique_ptr<InputStream> stream, Tensor rows, Finish finish)
    : stream_(std::move(stream)),
      rows_(std::move(rows)),
      total_rows_(rows_.dim(0)),
      finish_(std::move(finish)) {
  thread_ = std::thread([this] { run(); });
}

BackgroundRead::~BackgroundRead() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundRead::publish(int64_t rows) {
  {
    std::lock_guard lock(mutex_);
    ready_ = rows;
  }
  changed_.notify_all();
}

void BackgroundRead::run() {
  try {
    char* out = static_cast<char*>(rows_.raw_data());
    const size_t total = rows_.nbytes();
    const size_t row_bytes = total_rows_ > 0 ? total / static_cast<size_t>(total_rows_) : 0;
    const size_t piece =
        row_bytes == 0 ? total : std::max<size_t>(1, kPieceBytes / row_bytes) * row_bytes;
    const int64_t ahead_rows =
        row_bytes == 0 ? total_rows_ : static_cast<int64_t>(kAheadBytes / row_bytes) + 1;
    size_t done = 0;
    while (done < total) {
      {
        // Far enough ahead of the readers: wait until one asks for more (or the end).
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || ready_ < wanted_ + ahead_rows; });
        if (stopping_) return;
      }
      const size_t want = std::min(piece, total - done);
      const size_t got = stream_->read(out + done, want);
      done += got;
      // The last row waits for finish(): reaching the end means the file was checked.
      publish(std::min(static_cast<int64_t>(done / row_bytes), total_rows_ - 1));
      if (got < want) break;
    }
    finish_(*stream_, done);
    stream_.reset();
    publish(total_rows_);
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

int64_t BackgroundRead::wait_for(int64_t rows) const {
  std::unique_lock lock(mutex_);
  if (rows > wanted_) {
    wanted_ = rows;
    changed_.notify_all();  // the thread may be waiting, far enough ahead of the old wish
  }
  changed_.wait(lock, [&] { return ready_ >= rows || error_; });
  if (ready_ >= rows) return ready_;
  std::rethrow_exception(error_);
}

}  // namespace est::data
