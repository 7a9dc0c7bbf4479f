// Ring: the plans of each collective (which chunk is sent after which one is received) and the
// engine that runs them: sends on a persistent sender thread, receives on the calling thread,
// one atomic counter between them.
#include "distribute/net/ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "distribute/net/step_profile.h"
#include "ops/error.h"

namespace est::distribute {
namespace {

constexpr uint64_t kMaxGatherBytes = uint64_t{1} << 30;

enum Kind : uint32_t { kAllReduce = 1, kBroadcast = 2, kAllGatherSizes = 3, kAllGather = 4 };

const char* kind_name(uint32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "all-reduce";
    case kBroadcast:
      return "broadcast";
    case kAllGatherSizes:
    case kAllGather:
      return "all-gather";
  }
  return "collective";
}

// out = in x scale, element by element (in may be out).
template <class T>
void scale_into(void* out, const void* in, size_t n, double scale) {
  if (scale == 1.0) {
    if (out != in) std::memmove(out, in, n * sizeof(T));
    return;
  }
  const auto factor = static_cast<T>(scale);
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] * factor;
}

// into = own x scale + from, for a chunk of the reduce-scatter (own may be into). `from` may
// sit at any byte: a chunk added straight out of a shared-memory channel follows whatever the
// stream carried before it (an all-gather of odd sizes). Each number is loaded through memcpy,
// an unaligned load that vectorizes as the plain loop did. The scale is a pass of its own over
// the chunk (in cache by then), so that no compiler fuses it with the add: the sums stay those
// of a multiply, then an add, as on every other path.
template <class T>
void combine_into(char* into, const char* own, const char* from, size_t bytes, double scale) {
  T* out = reinterpret_cast<T*>(into);
  const T* mine = reinterpret_cast<const T*>(own);
  size_t n = bytes / sizeof(T);
  if (scale != 1.0) {
    scale_into<T>(out, mine, n, scale);
    mine = out;
  }
  for (size_t i = 0; i < n; ++i) {
    T in;
    std::memcpy(&in, from + i * sizeof(T), sizeof in);
    out[i] = mine[i] + in;
  }
}

std::string describe_bytes(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= (1u << 10)) return fmt::format("{:.1f} KB", static_cast<double>(bytes) / (1 << 10));
  return fmt::format("{} bytes", bytes);
}

// [begin, end) of part `index` when `total` units are cut into `parts` near-equal parts.
std::pair<size_t, size_t> part(size_t total, int parts, int index) {
  return {total * static_cast<size_t>(index) / static_cast<size_t>(parts),
          total * static_cast<size_t>(index + 1) / static_cast<size_t>(parts)};
}

}  // namespace

Ring::Ring(DataPlane& plane, int rank, int world, HealthCheck health)
    : plane_(plane), rank_(rank), world_(world), health_(std::move(health)) {
  if (const char* value = std::getenv("EST_RING_INLINE_SENDS"))
    inline_sends_ = std::string_view(value) != "0";
  if (world_ > 1) sender_ = std::thread([this] { sender_loop(); });
}

Ring::~Ring() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

void Ring::fail(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = error;
  aborted_.store(true);
  progress_.store(std::numeric_limits<int64_t>::max());
  progress_.notify_all();
}

void Ring::check_usable() const {
  if (aborted_.load()) std::rethrow_exception(error_);
}

HealthCheck Ring::stop_check(const HealthCheck& health) {
  return [this, &health](bool peer_closed) -> std::optional<JobStatus> {
    if (aborted_.load())
      return JobStatus::error(StatusCode::kAborted, "the other side of this collective failed");
    if (timeout_ && std::chrono::steady_clock::now() - started_ > *timeout_)
      return JobStatus::error(
          StatusCode::kDeadlineExceeded,
          fmt::format("a collective took longer than CommunicationOptions.timeout_seconds ({} s); "
                      "a task may be hung or far slower than the others",
                      static_cast<double>(timeout_->count()) / 1000.0));
    return health ? health(peer_closed) : std::nullopt;
  };
}

void Ring::sender_loop() {
  step_profile::note_thread("ring_sender");
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || sends_ != nullptr; });
    if (stopping_) return;
    const std::vector<SendItem>& items = *sends_;
    const std::string& what = *what_;
    lock.unlock();
    try {
      HealthCheck check = stop_check(health_);
      for (const SendItem& item : items) {
        int spins = 0;
        for (int64_t seen = progress_.load(std::memory_order_acquire); seen < item.after;
             seen = progress_.load(std::memory_order_acquire)) {
          if (++spins < 2000) continue;
          progress_.wait(seen, std::memory_order_acquire);
        }
        if (aborted_.load()) break;
        plane_.next().send(item.data, item.bytes, check, what);
      }
    } catch (...) {
      fail(std::current_exception());
    }
    lock.lock();
    sends_ = nullptr;
    sending_ = false;
    done_cv_.notify_all();
  }
}

void Ring::run(const Header& header, std::vector<SendItem> sends, std::vector<ReceiveItem> receives,
               const std::string& what) {
  check_usable();
  started_ = std::chrono::steady_clock::now();
  sends.insert(sends.begin(), {reinterpret_cast<const char*>(&header), sizeof header, 0});
  if (inline_sends_ && world_ == 2 && plane_.next().shared_memory()) {
    size_t bytes = 0;
    for (const SendItem& item : sends) bytes += item.bytes;
    if (2 * bytes <= DataPlane::kSharedMemoryBytes) {
      ++inline_collectives_;
      try {
        exchange(header, &sends, receives, what);
      } catch (...) {
        fail(std::current_exception());
      }
      check_usable();
      return;
    }
  }
  {
    std::lock_guard lock(mutex_);
    progress_.store(0);
    sends_ = &sends;
    what_ = &what;
    sending_ = true;
  }
  work_cv_.notify_one();
  try {
    exchange(header, nullptr, receives, what);
  } catch (...) {
    fail(std::current_exception());
  }
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return !sending_; });
  lock.unlock();
  check_usable();
}

void Ring::exchange(const Header& header, const std::vector<SendItem>* inline_sends,
                    const std::vector<ReceiveItem>& receives, const std::string& what) {
  HealthCheck check = stop_check(health_);
  size_t next_send = 0;
  // The inline sends that are due once `finished` receive items are done.
  auto send_due = [&](int64_t finished) {
    if (!inline_sends) return;
    for (; next_send < inline_sends->size() && (*inline_sends)[next_send].after <= finished;
         ++next_send)
      plane_.next().send((*inline_sends)[next_send].data, (*inline_sends)[next_send].bytes, check,
                         what);
  };
  send_due(0);
  {
    Header theirs{};
    {
      step_profile::Scope scope(step_profile::kPeerWait);
      plane_.previous().receive(&theirs, sizeof theirs, check, what);
    }
    if (theirs.sequence != header.sequence || theirs.kind != header.kind ||
        theirs.dtype != header.dtype || theirs.bytes != header.bytes ||
        theirs.extra != header.extra)
      throw InvalidArgumentError(fmt::format(
          "collective #{} differs between tasks: this task runs {} of {} ({}), but {} runs "
          "{} #{} of {} ({}); every worker must run the same model, with the same variables, "
          "for the same number of steps",
          header.sequence, kind_name(header.kind), describe_bytes(header.bytes),
          dtype_name(static_cast<ops::DType>(header.dtype)), plane_.previous().peer(),
          kind_name(theirs.kind), theirs.sequence, describe_bytes(theirs.bytes),
          theirs.kind == header.kind ? dtype_name(static_cast<ops::DType>(theirs.dtype))
                                     : std::string_view("?")));
  }
  int64_t finished = 0;
  for (const ReceiveItem& item : receives) {
    if (item.combine) {  // added straight out of a shared-memory channel, else from scratch_
      plane_.previous().receive_whole(
          item.bytes, scratch_,
          [&](std::string_view bytes) {
            item.combine(item.data, item.own, bytes.data(), bytes.size(), item.scale);
          },
          check, what);
    } else {
      plane_.previous().receive(item.data, item.bytes, check, what);
    }
    ++finished;
    if (inline_sends) {
      send_due(finished);
    } else {
      progress_.fetch_add(1, std::memory_order_release);
      progress_.notify_one();
    }
  }
  send_due(std::numeric_limits<int64_t>::max());
}

void Ring::all_reduce_sum(void* data, size_t count, ops::DType dtype, const std::string& what) {
  all_reduce_sum({{data, count}}, dtype, what);
}

void Ring::all_reduce_sum(const std::vector<std::pair<void*, size_t>>& spans, ops::DType dtype,
                          const std::string& what) {
  std::vector<ScaledSpan> scaled;
  scaled.reserve(spans.size());
  for (const auto& [data, count] : spans) scaled.push_back({data, data, count, 1.0});
  all_reduce_scaled(scaled, dtype, what);
}

void Ring::all_reduce_scaled(const std::vector<ScaledSpan>& spans, ops::DType dtype,
                             const std::string& what) {
  if (dtype != ops::DType::kF32 && dtype != ops::DType::kF64)
    throw InvalidArgumentError(fmt::format(
        "all-reduce: {} tensors cannot be summed; only float32 and float64", dtype_name(dtype)));
  size_t element = dtype == ops::DType::kF64 ? 8 : 4;
  auto scale = dtype == ops::DType::kF64 ? &scale_into<double> : &scale_into<float>;
  size_t count = 0;
  for (const auto& span : spans) count += span.count;
  if (world_ == 1 || count == 0) {
    for (const ScaledSpan& span : spans) scale(span.out, span.in, span.count, span.scale);
    return;
  }
  auto combine = dtype == ops::DType::kF64 ? &combine_into<double> : &combine_into<float>;
  // Each span's first element in the concatenation.
  std::vector<size_t> starts;
  for (size_t offset = 0; const auto& span : spans) {
    starts.push_back(offset);
    offset += span.count;
  }
  // Calls piece(span, first element within it, elements) for the parts of elements
  // [begin, end) of the concatenation.
  auto for_pieces = [&](size_t begin, size_t end, const auto& piece) {
    auto s = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                 starts.begin()) -
             1;
    for (; begin < end; ++s) {
      size_t span_end = starts[s] + spans[s].count;
      if (span_end <= begin) continue;  // an empty span
      size_t n = std::min(end, span_end) - begin;
      piece(spans[s], begin - starts[s], n);
      begin += n;
    }
  };
  auto out_at = [&](const ScaledSpan& span, size_t first) {
    return static_cast<char*>(span.out) + first * element;
  };
  auto in_at = [&](const ScaledSpan& span, size_t first) {
    return static_cast<const char*>(span.in) + first * element;
  };
  size_t chunk = kChunkBytes / element;
  scratch_.reserve(kChunkBytes);
  auto segment = [&](int s) { return part(count, world_, ((s % world_) + world_) % world_); };
  std::vector<SendItem> sends;
  std::vector<ReceiveItem> receives;
  std::vector<int64_t> chunk_done;  // per chunk of the step before: receive items once done
  for (int step = 0; step < 2 * (world_ - 1); ++step) {
    bool scatter = step < world_ - 1;
    int k = scatter ? step : step - (world_ - 1);
    auto [send_begin, send_end] = segment(scatter ? rank_ - k : rank_ + 1 - k);
    auto [receive_begin, receive_end] = segment(scatter ? rank_ - k - 1 : rank_ - k);
    for (size_t i = send_begin, j = 0; i < send_end; i += chunk, ++j) {
      int64_t after = step == 0 ? 0 : chunk_done[j];
      for_pieces(
          i, std::min(i + chunk, send_end), [&](const ScaledSpan& span, size_t first, size_t n) {
            const char* data = out_at(span, first);
            if (step == 0 && span.scale == 1.0) {  // this task's own numbers, sent as they are
              data = in_at(span, first);
            } else if (step == 0) {  // scaled first, into the out that the all-gather overwrites
              scale(out_at(span, first), in_at(span, first), n, span.scale);
            }
            sends.push_back({data, n * element, after});
          });
    }
    chunk_done.clear();
    for (size_t i = receive_begin; i < receive_end; i += chunk) {
      for_pieces(i, std::min(i + chunk, receive_end),
                 [&](const ScaledSpan& span, size_t first, size_t n) {
                   ReceiveItem item{out_at(span, first), n * element};
                   if (scatter) {
                     item.combine = combine;
                     item.own = in_at(span, first);
                     item.scale = span.scale;
                   }
                   receives.push_back(item);
                 });
      chunk_done.push_back(static_cast<int64_t>(receives.size()));
    }
  }
  Header header{++sequence_, kAllReduce, static_cast<uint32_t>(dtype), count * element, 0};
  run(header, std::move(sends), std::move(receives), what);
}

void Ring::broadcast(void* data, size_t bytes, int root, const std::string& what) {
  if (world_ == 1 || bytes == 0) return;
  char* base = static_cast<char*>(data);
  int next = (rank_ + 1) % world_;
  std::vector<SendItem> sends;
  std::vector<ReceiveItem> receives;
  size_t index = 0;
  for (size_t i = 0; i < bytes; i += kChunkBytes, ++index) {
    size_t n = std::min(kChunkBytes, bytes - i);
    if (rank_ != root) receives.push_back({base + i, n});
    if (next != root)
      sends.push_back({base + i, n, rank_ == root ? 0 : static_cast<int64_t>(index) + 1});
  }
  Header header{++sequence_, kBroadcast, 0, bytes, static_cast<uint64_t>(root)};
  // The chain does not close: the root receives nothing and the last task sends nothing, but
  // every link still carries the header, so the ring stays in step.
  run(header, std::move(sends), std::move(receives), what);
}

std::vector<std::string> Ring::all_gather(const std::string& mine, const std::string& what) {
  if (world_ == 1) return {mine};
  auto gather_blocks = [&](std::vector<char>& buffer, const std::vector<size_t>& offsets,
                           uint32_t kind) {
    std::vector<SendItem> sends;
    std::vector<ReceiveItem> receives;
    auto block = [&](int b) {
      size_t index = static_cast<size_t>(((b % world_) + world_) % world_);
      return std::pair(offsets[index], offsets[index + 1] - offsets[index]);
    };
    for (int step = 0; step < world_ - 1; ++step) {
      auto [send_offset, send_bytes] = block(rank_ - step);
      auto [receive_offset, receive_bytes] = block(rank_ - step - 1);
      sends.push_back({buffer.data() + send_offset, send_bytes, step});
      receives.push_back({buffer.data() + receive_offset, receive_bytes});
    }
    Header header{++sequence_, kind, 0, offsets.back(), 0};
    run(header, std::move(sends), std::move(receives), what);
  };
  // First every task's size, then the blocks themselves.
  std::vector<char> sizes(static_cast<size_t>(world_) * sizeof(uint64_t));
  uint64_t my_size = mine.size();
  std::memcpy(sizes.data() + static_cast<size_t>(rank_) * sizeof(uint64_t), &my_size,
              sizeof my_size);
  std::vector<size_t> size_offsets;
  for (int r = 0; r <= world_; ++r)
    size_offsets.push_back(static_cast<size_t>(r) * sizeof(uint64_t));
  gather_blocks(sizes, size_offsets, kAllGatherSizes);
  std::vector<size_t> offsets{0};
  for (int r = 0; r < world_; ++r) {
    uint64_t size = 0;
    std::memcpy(&size, sizes.data() + static_cast<size_t>(r) * sizeof(uint64_t), sizeof size);
    if (size > kMaxGatherBytes)
      throw DataLossError(
          fmt::format("all-gather: task {} declares a block of {} bytes, over the "
                      "limit of {}; its data plane sent garbage",
                      r, size, kMaxGatherBytes));
    offsets.push_back(offsets.back() + size);
  }
  std::vector<char> buffer(offsets.back());
  std::memcpy(buffer.data() + offsets[static_cast<size_t>(rank_)], mine.data(), mine.size());
  gather_blocks(buffer, offsets, kAllGather);
  std::vector<std::string> result;
  for (int r = 0; r < world_; ++r)
    result.emplace_back(buffer.data() + offsets[static_cast<size_t>(r)],
                        offsets[static_cast<size_t>(r) + 1] - offsets[static_cast<size_t>(r)]);
  return result;
}

}  // namespace est::distribute
