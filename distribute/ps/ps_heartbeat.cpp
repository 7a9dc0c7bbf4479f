// PsHeartbeat: the worker's pinging thread and the ps task's answers.
#include "distribute/ps/ps_heartbeat.h"

#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include "ops/error.h"

namespace est::distribute {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kInterval = std::chrono::milliseconds(250);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Whether bytes wait to be read on `fd` (an answer the pinging thread has not read yet).
bool readable(int fd) {
  pollfd waiting{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&waiting, 1, 0) > 0 && (waiting.revents & POLLIN);
}

}  // namespace

PsHeartbeat::PsHeartbeat(std::vector<Link> links, std::vector<std::string> names,
                         std::chrono::milliseconds timeout)
    : links_(std::move(links)),
      names_(std::move(names)),
      timeout_(timeout),
      beats_(new Beat[links_.size()]) {
  thread_ = std::thread([this] { run(); });
}

PsHeartbeat::~PsHeartbeat() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void PsHeartbeat::run() {
  while (!stopping_) {
    const int64_t now = now_ns();
    std::vector<pollfd> answers;
    for (size_t i = 0; i < links_.size(); ++i) {
      Beat& beat = beats_[i];
      if (beat.closed) continue;
      if (beat.sent_ns == 0) {
        char byte = 1;
        if (::send(links_[i].fd(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) beat.sent_ns = now;
      }
      answers.push_back({.fd = links_[i].fd(), .events = POLLIN, .revents = 0});
    }
    ::poll(answers.data(), answers.size(), static_cast<int>(kInterval.count()));
    for (size_t i = 0, a = 0; i < links_.size(); ++i) {
      Beat& beat = beats_[i];
      if (beat.closed) continue;
      if (answers[a++].revents == 0) continue;
      char bytes[16];
      ssize_t got = ::recv(links_[i].fd(), bytes, sizeof bytes, MSG_DONTWAIT);
      if (got > 0)
        beat.sent_ns = 0;
      else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        beat.closed = true;  // the ps task died: its request connection says so
    }
    std::this_thread::sleep_for(std::max(std::chrono::nanoseconds(0),
                                         kInterval - std::chrono::nanoseconds(now_ns() - now)));
  }
}

std::optional<JobStatus> PsHeartbeat::check() const {
  const int64_t now = now_ns();
  for (size_t i = 0; i < links_.size(); ++i) {
    const Beat& beat = beats_[i];
    int64_t sent = beat.sent_ns;
    if (beat.closed || sent == 0 || std::chrono::nanoseconds(now - sent) < timeout_) continue;
    if (readable(links_[i].fd())) continue;  // it answered; this process was slow to read it
    return JobStatus::error(
        StatusCode::kUnavailable,
        fmt::format("{} stopped answering: no heartbeat for {:.1f} s while its connection stays "
                    "open (the process is stopped, e.g. by SIGSTOP, hung, or its host is "
                    "unreachable); see its log, and restart the job",
                    names_[i],
                    std::chrono::duration<double>(std::chrono::nanoseconds(now - sent)).count()));
  }
  return std::nullopt;
}

void answer_heartbeats(Link& link, const std::atomic<bool>& stopping) {
  HealthCheck health = [&stopping](bool) -> std::optional<JobStatus> {
    if (stopping) return JobStatus::error(StatusCode::kCancelled, "the ps task is stopping");
    return std::nullopt;
  };
  try {
    for (;;) {
      char byte = 0;
      link.receive_raw(&byte, 1, health, "answering a heartbeat");
      link.send_raw(&byte, 1, health, "answering a heartbeat");
    }
  } catch (const Error&) {
    // The worker went away or this task stops: nothing to answer any more.
  }
}

}  // namespace est::distribute
