// Ring: the collectives of a multi-worker job over the data plane's ring of TCP links, the
// algorithms of TensorFlow's CommunicationImplementation.RING (and of Baidu's and Horovod's
// ring all-reduce).
//
// All-reduce is a reduce-scatter then an all-gather: the buffer is cut into one segment per
// task; in world - 1 steps each task sends a segment to the next task while it receives one from
// the previous task and adds it into its own copy, so that each task ends up owning the sum of
// one segment; in world - 1 more steps the sums travel round the ring. Each segment is cut into
// chunks and the two directions are pipelined: a sender thread sends chunk j of a step as soon as
// the receiving (calling) thread has reduced chunk j of the step before, so sending, receiving
// and adding overlap. Every element's sum is computed by exactly one task and copied to the
// others, so the result is bitwise the same on every task. Broadcast is a pipelined chain from
// the root; all-gather passes blocks round the ring.
//
// Each collective starts with a small header (sequence number, kind, size, dtype) that the
// receiver checks against its own: tasks that run different models or different numbers of
// steps get an InvalidArgumentError saying so instead of exchanging garbage. After an error the
// ring is broken (the byte streams are out of step) and every later call throws that error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/net/data_plane.h"
#include "ops/dtype.h"

namespace est::distribute {

class Ring {
 public:
  // `plane` must have connected its ring (or world is 1). `health` is asked between the 100 ms
  // slices of every wait.
  Ring(DataPlane& plane, int rank, int world, HealthCheck health);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  // Sums `count` elements (float32 or float64) over every task, in place. `what` names the
  // operation in messages ("all-reduce at step 812").
  void all_reduce_sum(void* data, size_t count, ops::DType dtype, const std::string& what);
  // Copies `bytes` bytes of the root's buffer into every task's.
  void broadcast(void* data, size_t bytes, int root, const std::string& what);
  // Every task's `mine`, indexed by rank.
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what);

  // A collective that takes longer than this fails with DeadlineExceededError (CommunicationOptions
  // timeout_seconds); unset: no limit (dead or stopped peers are found by the health check).
  void set_timeout(std::optional<std::chrono::milliseconds> timeout) { timeout_ = timeout; }

  // The chunk size of the pipeline (bytes).
  static constexpr size_t kChunkBytes = 256 << 10;

 private:
  struct SendItem {
    const char* data;
    size_t bytes;
    int64_t after;  // sent once the receiver has finished this many items
  };
  struct ReceiveItem {
    char* data;
    size_t bytes;
    // Adds the received bytes into `data` instead of receiving into it (reduce-scatter).
    void (*combine)(char* into, const char* from, size_t bytes) = nullptr;
  };
  struct Header {
    uint64_t sequence;
    uint32_t kind;
    uint32_t dtype;
    uint64_t bytes;
    uint64_t extra;
  };

  // Runs one collective: the sends on the sender thread, the receives here.
  void run(const Header& header, std::vector<SendItem> sends, std::vector<ReceiveItem> receives,
           const std::string& what);
  void sender_loop();
  void fail(std::exception_ptr error);
  void check_usable() const;
  HealthCheck stop_check(const HealthCheck& health);

  DataPlane& plane_;
  int rank_;
  int world_;
  HealthCheck health_;
  uint64_t sequence_ = 0;
  std::optional<std::chrono::milliseconds> timeout_;
  std::chrono::steady_clock::time_point started_;  // of the current collective
  std::vector<char> scratch_;

  // Between the calling thread and the sender thread.
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::vector<SendItem>* sends_ = nullptr;
  const std::string* what_ = nullptr;
  bool sending_ = false;
  bool stopping_ = false;
  std::atomic<int64_t> progress_ = 0;  // receive items finished in the current collective
  std::atomic<bool> aborted_ = false;
  std::exception_ptr error_;  // the first failure; the ring is unusable after it
  std::thread sender_;
};

}  // namespace est::distribute
