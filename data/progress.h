// Progress lines for long input-pipeline work (filling a shuffle buffer, caching a dataset), in
// TensorFlow's words, at most one every 10 seconds so that short work stays silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ops/logging.h"

namespace est::data {

class ProgressLog {
 public:
  static constexpr std::chrono::seconds kInterval{10};

  // Call once per element; looks at the clock every 256 calls.
  template <class Report>
  void tick(Report&& report) {
    if ((++calls_ & 255) != 0) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < kInterval) return;
    last_ = now;
    reported_ = true;
    report();
  }
  bool reported() const { return reported_; }
  void restart() {
    last_ = std::chrono::steady_clock::now();
    reported_ = false;
  }

 private:
  uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  bool reported_ = false;
};

}  // namespace est::data
