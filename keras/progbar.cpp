// Progbar: Keras's progress bar and per-epoch line (see progbar.h).
#include "keras/progbar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace est::keras {
namespace {

std::string format_value(double value, bool absolute) {
  bool fixed = absolute ? std::abs(value) > 1e-3 : value > 1e-3;
  return fixed ? fmt::format(" {:.4f}", value) : fmt::format(" {:.4e}", value);
}

int num_digits(int64_t target) {
  return static_cast<int>(std::log10(static_cast<double>(target))) + 1;
}

}  // namespace

ProgbarOutput stdout_output() {
  return {.write =
              [](const std::string& text) {
                std::fwrite(text.data(), 1, text.size(), stdout);
                std::fflush(stdout);
              },
          .is_terminal = isatty(fileno(stdout)) != 0,
          .now =
              [] {
                return std::chrono::duration<double>(
                           std::chrono::steady_clock::now().time_since_epoch())
                    .count();
              }};
}

Progbar::Progbar(std::optional<int64_t> target, int verbose, ProgbarOutput output, double interval,
                 int width)
    : target_(target),
      verbose_(verbose),
      output_(std::move(output)),
      interval_(interval),
      width_(width),
      start_(output_.now()),
      epoch_start_(start_) {}

std::string Progbar::format_time(double seconds, const std::string& unit) const {
  if (seconds >= 1 || seconds == 0) return fmt::format(" {:.0f}s/{}", seconds, unit);
  if (seconds >= 1e-3) return fmt::format(" {:.0f}ms/{}", seconds * 1e3, unit);
  return fmt::format(" {:.0f}us/{}", seconds * 1e6, unit);
}

double Progbar::step_duration(int64_t current, double now) {
  if (current == 0) return 0;
  double per_step = time_after_first_step_ && current > 1
                        ? (now - *time_after_first_step_) / static_cast<double>(current - 1)
                        : (now - start_) / static_cast<double>(current);
  if (current == 1) time_after_first_step_ = now;
  return per_step;
}

void Progbar::update(int64_t current, const Values& values, std::optional<bool> finalize_in) {
  bool finalize = finalize_in.value_or(target_ && current >= *target_);
  for (const auto& [key, value] : values) {
    auto it = std::find_if(values_.begin(), values_.end(),
                           [&](const auto& entry) { return entry.first == key; });
    if (it == values_.end())
      values_.emplace_back(key, value);
    else
      it->second = value;
  }
  double now = output_.now();
  std::string info = fmt::format(" - {:.0f}s", now - start_);
  if (target_ && current == *target_) epoch_end_ = now;
  if (verbose_ == 1) {
    if (now - last_update_ < interval_ && !finalize) return;
    if (!output_.is_terminal && !finalize) {
      step_duration(current, now);  // keeps the estimate's first-step time
      last_update_ = now;
      return;
    }
    size_t previous_width = total_width_;
    std::string message;
    if (output_.is_terminal) message = std::string(previous_width, '\b') + "\r";
    std::string bar;
    if (target_) {
      bar = fmt::format("{:>{}}/{} [", current, num_digits(*target_), *target_);
      int progress = static_cast<int>(width_ * (static_cast<double>(current) / *target_));
      if (progress > 0) {
        bar += std::string(progress - 1, '=');
        bar += current < *target_ ? '>' : '=';
      }
      bar += std::string(width_ - progress, '.') + "]";
    } else {
      bar = fmt::format("{:>7}/Unknown", current);
    }
    total_width_ = bar.size();
    message += bar;
    double per_step = step_duration(current, now);
    if (!target_ || finalize) {
      info += format_time(per_step, "step");
    } else {
      double eta = per_step * static_cast<double>(*target_ - current);
      std::string eta_text;
      if (eta > 3600)
        eta_text = fmt::format("{}:{:02}:{:02}", static_cast<int64_t>(eta / 3600),
                               static_cast<int64_t>(std::fmod(eta, 3600) / 60),
                               static_cast<int64_t>(std::fmod(eta, 60)));
      else if (eta > 60)
        eta_text = fmt::format("{}:{:02}", static_cast<int64_t>(eta / 60),
                               static_cast<int64_t>(std::fmod(eta, 60)));
      else
        eta_text = fmt::format("{}s", static_cast<int64_t>(eta));
      info = " - ETA: " + eta_text;
    }
    for (const auto& [key, value] : values_) info += " - " + key + ":" + format_value(value, true);
    total_width_ += info.size();
    if (previous_width > total_width_) info += std::string(previous_width - total_width_, ' ');
    if (finalize) info += "\n";
    output_.write(message + info);
  } else if (verbose_ == 2 && finalize && target_) {
    std::string line = fmt::format("{:>{}}/{}", current, num_digits(*target_), *target_) + info;
    for (const auto& [key, value] : values_) line += " - " + key + ":" + format_value(value, false);
    if (epoch_end_) {
      double epoch_seconds = *epoch_end_ - epoch_start_;
      line += " -" + format_time(epoch_seconds, "epoch");
      line += " -" + format_time(epoch_seconds / static_cast<double>(*target_), "step");
      epoch_start_ = now;
      epoch_end_.reset();
      line += "\n";
    }
    output_.write(line);
  }
  last_update_ = now;
}

}  // namespace est::keras
