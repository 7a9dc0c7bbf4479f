// A process-wide on/off switch whose default an environment variable gives, read on first use
// (device placement logging, kernel calibration): set() overrides it, reload() reads the
// variable again (tests).
#pragma once

#include <atomic>

namespace est::ops {

class EnvironmentSwitch {
 public:
  // `read` says whether the environment turns the switch on.
  explicit EnvironmentSwitch(bool (*read)()) : read_(read) {}

  bool on() {
    int state = state_.load(std::memory_order_relaxed);
    if (state < 0) {
      int expected = -1;
      state_.compare_exchange_strong(expected, read_() ? 1 : 0);
      state = state_.load();
    }
    return state == 1;
  }
  void set(bool on) { state_.store(on ? 1 : 0); }
  bool reload() {
    const bool value = read_();
    set(value);
    return value;
  }

 private:
  bool (*read_)();
  std::atomic<int> state_{-1};  // -1: not read yet, 0 off, 1 on
};

}  // namespace est::ops
