// Keras's progress bar (keras/utils/generic_utils.py Progbar, Keras 2.x), byte for byte.
//
// verbose 1 on a terminal: the bar rewritten in place ('\b' x previous width, then '\r') at most
// every `interval` seconds and at the end, e.g.
//   70/70 [==============================] - 1s 7ms/step - loss: 2.2720 - accuracy: 0.2181
// with " - ETA: 3s" instead of the times before the end. verbose 1 when the output is not a
// terminal: only that final line per epoch, ended by '\n' (Keras on a POSIX system writes the
// in-place updates to a file or pipe too, whose last rewrite is this line; a log keeps just it).
// verbose 2: at the end only, "70/70 - 1s - loss: ... - accuracy: ... - 1s/epoch - 7ms/step".
// Values are shown as given (ProgbarLogger marks every model metric stateful: they are already
// running means), "%.4f", or "%.4e" when |value| <= 1e-3 (verbose 2: value <= 1e-3). Time units:
// "%.0fs", "%.0fms", "%.0fus" per step, from the steps after the first.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace est::keras {

// Where the bar goes: `write` prints text as is; `is_terminal` chooses the dynamic display;
// `now` is the clock in seconds (the tests fix it).
struct ProgbarOutput {
  std::function<void(const std::string&)> write;
  bool is_terminal = false;
  std::function<double()> now;
};
// stdout, whether it is a terminal (isatty), and the steady clock.
ProgbarOutput stdout_output();

class Progbar {
 public:
  using Values = std::vector<std::pair<std::string, double>>;
  // target: the number of steps (nullopt: unknown, "%7d/Unknown").
  Progbar(std::optional<int64_t> target, int verbose, ProgbarOutput output, double interval = 0.05,
          int width = 30);
  // After step `current` (1-based count of steps done) with the values to show.
  void update(int64_t current, const Values& values, std::optional<bool> finalize = {});
  void set_target(int64_t target) { target_ = target; }

 private:
  std::string format_time(double seconds, const std::string& unit) const;
  double step_duration(int64_t current, double now);

  std::optional<int64_t> target_;
  int verbose_;
  ProgbarOutput output_;
  double interval_;
  int width_;
  size_t total_width_ = 0;
  Values values_;  // in first-seen order
  double start_;
  double last_update_ = 0;
  std::optional<double> time_after_first_step_;
  double epoch_start_;
  std::optional<double> epoch_end_;
};

}  // namespace est::keras
