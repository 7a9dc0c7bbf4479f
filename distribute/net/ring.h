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
#include <utility>
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
  // The same over the concatenation of `spans` (pointer, element count), without copying them
  // into one buffer: the bytes on the wire, and so the sums, are those of all_reduce_sum on
  // the concatenated buffer.
  void all_reduce_sum(const std::vector<std::pair<void*, size_t>>& spans, ops::DType dtype,
                      const std::string& what);
  // One span of all_reduce_scaled: `count` elements read from `in` (only read), times `scale`,
  // summed over every task into `out` (in == out sums in place).
  struct ScaledSpan {
    const void* in;
    void* out;
    size_t count;
    double scale = 1.0;
  };
  // out = the sum over every task of scale x in, span by span, with no pass of its own for the
  // scale or for a copy of `in` into `out`: a task's own numbers are scaled where the
  // reduce-scatter first reads them (as TensorFlow's collective ops apply the final op in the
  // last step). The outs must not overlap each other, nor any in but their own; ins may
  // overlap each other. The bytes on the wire are those of all_reduce_sum on the scaled
  // numbers (each scaled as x * T(scale), then added), so are the sums.
  void all_reduce_scaled(const std::vector<ScaledSpan>& spans, ops::DType dtype,
                         const std::string& what);
  // Copies `bytes` bytes of the root's buffer into every task's.
  void broadcast(void* data, size_t bytes, int root, const std::string& what);
  // Every task's `mine`, indexed by rank.
  std::vector<std::string> all_gather(const std::string& mine, const std::string& what);

  // A collective that takes longer than this fails with DeadlineExceededError (CommunicationOptions
  // timeout_seconds); unset: no limit (dead or stopped peers are found by the health check).
  void set_timeout(std::optional<std::chrono::milliseconds> timeout) { timeout_ = timeout; }

  // The chunk size of the pipeline (bytes).
  static constexpr size_t kChunkBytes = 256 << 10;

  // Whether a collective of a 2-task ring over shared memory whose sends fit in half the
  // channel's buffer writes them on the calling thread, between its receives, instead of
  // handing them to the sender thread (on by default; EST_RING_INLINE_SENDS=0 turns it off).
  // The bytes and their order are the same either way, so are the results; what goes is the
  // sender thread's wake-up on every collective, which on a host whose cores are all busy
  // (2 workers x 1 core) waits for a core behind the other worker's compute. Why it cannot
  // deadlock: in a ring of two, a task that finished collective j has read the peer's header
  // of j, so the peer has read everything of j - 1; the channel then holds at most the bytes
  // of j and j + 1, each at most half of it, and a write that waits for room waits for a peer
  // that is reading.
  void set_inline_sends(bool on) { inline_sends_ = on; }
  bool inline_sends() const { return inline_sends_; }
  // How many collectives so far sent on the calling thread.
  uint64_t inline_collectives() const { return inline_collectives_; }

 private:
  struct SendItem {
    const char* data;
    size_t bytes;
    int64_t after;  // sent once the receiver has finished this many items
  };
  struct ReceiveItem {
    char* data;
    size_t bytes;
    // Reduce-scatter: data = own x scale + the received bytes, instead of receiving into it
    // (own may be data).
    void (*combine)(char* into, const char* own, const char* from, size_t bytes,
                    double scale) = nullptr;
    const char* own = nullptr;
    double scale = 1.0;
  };
  struct Header {
    uint64_t sequence;
    uint32_t kind;
    uint32_t dtype;
    uint64_t bytes;
    uint64_t extra;
  };

  // Runs one collective: the sends on the sender thread (or here, see set_inline_sends), the
  // receives here.
  void run(const Header& header, std::vector<SendItem> sends, std::vector<ReceiveItem> receives,
           const std::string& what);
  // The receives, and where `inline_sends`, the sends as they fall due; on the calling thread.
  void exchange(const Header& header, const std::vector<SendItem>* inline_sends,
                const std::vector<ReceiveItem>& receives, const std::string& what);
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
  bool inline_sends_ = true;
  uint64_t inline_collectives_ = 0;
  std::chrono::steady_clock::time_point started_;  // of the current collective
  std::string scratch_;  // a received chunk to add, when it does not come through shared memory

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
