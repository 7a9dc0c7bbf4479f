// The messages between workers and `ps` tasks, and their framing on a data-plane Link.
//
// A worker's step is one request and one reply per ps task (TF1 sends one RecvTensor per
// variable): the gradients of the variables that task holds, the moving averages of its
// statistics, and the names whose fresh values it wants back, batched in one frame; large
// gradients may go ahead of it in kStage frames (no reply) as the backward pass completes them,
// so the transfer overlaps the backward pass. A frame is its length (8 bytes) then its bytes; a
// tensor is its name, dtype, shape and raw elements (host byte order: the tasks of a job run the
// same build), or for a sparse tensor its indices and values, or for a row-sparse gradient (TF's
// IndexedSlices) its dense shape, row indices and rows. Strings are not carried (a ps holds
// numeric variables only).
//
// Embedding tables move by rows: a step pulls only the rows its lookups read (kPullRows, the
// gather TF's embedding_lookup runs on the ps task) and pushes their gradients as slices, which
// the owner applies with the optimizer's sparse update.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "distribute/net/data_plane.h"
#include "ops/error.h"
#include "ops/indexed_slices.h"
#include "ops/tensor.h"

namespace est::distribute {

enum class PsRequestKind : uint8_t {
  kInitialize = 1,  // the chief's values (variables, slots, global step): create or overwrite
  kPull = 2,        // values of `names`; kFailedPrecondition for one not initialized yet
  kPushPull = 3,    // apply `tensors` (gradients), then the values of `names`
  kPullAll = 4,     // every tensor the task holds (checkpoints)
  kWorkerDone = 5,  // `message` (the task) has finished training
  kEndJob = 6,      // the chief (`message`) is done: exit once the others are done or gone
  kAbort = 7,       // the job failed with `message`: exit with that error
  // Synchronous training (sync_replicas.h). The chief, as it starts: `tensors` holds the
  // SyncReplicasOptions, `global_step` the step to start from; gradients are aggregated from now.
  kSyncConfigure = 8,
  // `tensors`: gradients computed at `global_step` (the worker's local step) into the
  // accumulator, dropped when stale; `message` names the worker.
  kSyncPush = 9,
  // To the task holding global_step: `message` (the worker) pushed the gradients of
  // `global_step` to every ps task; waits for a token, which the reply's global_step holds.
  kTakeToken = 10,
  kPullRows = 11,  // for each of `tensors` (a variable, int64 row ids [k]): its rows [k, ...]
  // A synchronous step in one round trip: kSyncPush's push (with `moving_averages`); then, on
  // the task holding global_step, kTakeToken's wait (the token in the reply's `token`), on the
  // others a wait until this task has applied step `global_step` (or dropped the push as
  // stale); then the values of `names`, as kPull.
  kSyncStep = 12,
  // Gradients of the connection's next kPushPull, sent while the backward pass still runs:
  // kept (no reply) and applied with that push's own, in one update. kDiscardStaged drops
  // them (the step that staged them failed before its push).
  kStage = 16,
  kDiscardStaged = 17,
};

// Whether a request of `kind` gets a reply (kStage and kDiscardStaged do not).
inline bool expects_reply(PsRequestKind kind) {
  return kind != PsRequestKind::kStage && kind != PsRequestKind::kDiscardStaged;
}

struct NamedTensor {
  std::string name;
  ops::Tensor value;  // on the host; undefined when `rows` holds the value
  // A row-sparse gradient (TF's IndexedSlices) instead of `value`: rows of the variable's axis
  // 0 (of its part, on a ps task) and their values.
  ops::IndexedSlices rows{};
};

// A moving average the owner applies to a variable it holds (batch norm's moving statistics:
// TF colocates assign_moving_average's ops with the variable, so they run on its ps task):
// variable = variable * momentum + value * (1 - momentum).
struct PsMovingAverage {
  std::string name;
  ops::Tensor value;  // on the host
  double momentum = 0;
};

struct PsRequest {
  PsRequestKind kind = PsRequestKind::kPull;
  // kPushPull: the global step the worker last saw (the learning rate's step on ps tasks that
  // do not hold global_step).
  int64_t global_step = 0;
  std::vector<NamedTensor> tensors;
  std::vector<std::string> names;
  std::string message;
  std::vector<PsMovingAverage> moving_averages;  // kPushPull: applied after the gradients
};

struct PsReply {
  StatusCode code = StatusCode{};  // 0: done
  std::string message;             // the error otherwise
  int64_t global_step = -1;        // after the request, from the task that holds it; else -1
  int64_t token = -1;              // kSyncStep on the task that holds global_step: the token
  std::vector<NamedTensor> tensors;
  bool ok() const { return code == StatusCode{}; }
};

std::string encode(const PsRequest& request);
std::string encode(const PsReply& reply);
// The same into `out`, replacing its bytes but keeping its capacity: a connection that reuses
// one buffer for its frames does not map fresh pages for each megabyte-sized step.
void encode(const PsRequest& request, std::string& out);
void encode(const PsReply& reply, std::string& out);
// DataLossError naming `from` when the bytes are not a well-formed message.
PsRequest decode_request(std::string_view bytes, const std::string& from);
// Where a reply's dense tensor `name` may be decoded to: a host tensor (the worker's copy of the
// variable), or null for a fresh one.
using DecodeInto = std::function<ops::Tensor*(const std::string& name)>;
// A dense tensor that `into` maps to a host tensor of the same dtype and shape is decoded
// straight into it (its NamedTensor then shares that tensor's storage): no fresh tensor and no
// second copy per pulled value.
PsReply decode_reply(std::string_view bytes, const std::string& from, const DecodeInto& into = {});

// A message as one frame on `link`, encoded straight into a shared-memory link's buffer when
// the frame fits in it: returns the frame's bytes, its length field included, or 0, sending
// nothing, when the link has no channel or the frame does not fit (or, with `wait` false, the
// channel has not room for it now: a ps task replying under its lock does not wait for a
// worker to read).
uint64_t send_in_place(Link& link, const PsRequest& request, const HealthCheck& health,
                       const std::string& what, bool wait = true);
uint64_t send_in_place(Link& link, const PsReply& reply, const HealthCheck& health,
                       const std::string& what, bool wait = true);
// A message as one frame on `link`, encoded straight into a shared-memory link's buffer when
// the frame fits in it (no copy of the tensors but that one), else into `buffer` (its capacity
// reused) and sent from there; returns the frame's bytes, its length field included.
uint64_t send_message(Link& link, const PsRequest& request, std::string& buffer,
                      const HealthCheck& health, const std::string& what);
uint64_t send_message(Link& link, const PsReply& reply, std::string& buffer,
                      const HealthCheck& health, const std::string& what);
// One frame on `link`; receive_frame refuses frames over `max_bytes` (DataLossError).
void send_frame(Link& link, const std::string& bytes, const HealthCheck& health,
                const std::string& what);
std::string receive_frame(Link& link, const HealthCheck& health, const std::string& what,
                          uint64_t max_bytes = uint64_t{1} << 36);
// The same into `out` (its capacity reused, as encode's).
void receive_frame(Link& link, const HealthCheck& health, const std::string& what, std::string& out,
                   uint64_t max_bytes = uint64_t{1} << 36);
// Receives one frame and hands its bytes to `consume` (Link::receive_whole: in place from a
// shared-memory link, else through `buffer`); returns its size.
uint64_t receive_frame(Link& link, const HealthCheck& health, const std::string& what,
                       std::string& buffer, const std::function<void(std::string_view)>& consume,
                       uint64_t max_bytes = uint64_t{1} << 36);
// Releases `buffer`'s memory when a frame made it larger than a step's usually are (a
// checkpoint's pull of everything), so that a connection does not hold that much for good.
void trim_frame_buffer(std::string& buffer);

}  // namespace est::distribute
