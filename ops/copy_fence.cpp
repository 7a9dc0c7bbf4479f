// Fenced copies (copy_fence.h): the registry of pending pairs, the copier thread and the fence
// that Tensor::element_data() calls while pairs are pending.
//
// One mutex guards the registry. A pair is queued, then copying (by the copier or by the
// thread that met it in the fence; the memcpy runs outside the mutex), then done: its storages
// leave the registry, their `fenced` flags drop and waiters are woken. The flags let the fence
// skip the mutex for every storage that is not part of a pending pair.
#include "ops/copy_fence.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "ops/storage.h"

namespace est::ops {
namespace detail {
std::atomic<int64_t> g_pending_copies{0};
}  // namespace detail

namespace {

using detail::g_pending_copies;

struct Pair {
  enum class State { kQueued, kCopying, kDone };
  std::shared_ptr<Storage> source;
  std::shared_ptr<Storage> target;
  State state = State::kQueued;
};

struct Registry {
  std::mutex mutex;
  std::condition_variable work;  // the copier: a pair was queued or the copier resumed
  std::condition_variable done;  // waiters: a pair finished
  std::unordered_map<const Storage*, std::shared_ptr<Pair>> by_storage;
  std::deque<std::shared_ptr<Pair>> queue;
  bool copier_running = false;
  bool paused = false;
};

bool lazy_from_environment() {
  const char* value = std::getenv("EST_SNAPSHOT_COPY");
  return value == nullptr || std::string_view(value) != "eager";
}

std::atomic<bool> g_lazy{lazy_from_environment()};

void before_fork();
void after_fork_in_parent();
void after_fork_in_child();

// Leaked on purpose, like the allocators: storages may be fenced while static objects die.
Registry& registry() {
  static Registry* r = [] {
    auto* created = new Registry;
    ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return created;
  }();
  return *r;
}

void before_fork() { registry().mutex.lock(); }
void after_fork_in_parent() { registry().mutex.unlock(); }
// The child has no copier, and a pair the parent was copying will never finish there: queue
// such pairs again (their sources cannot have changed: every access finishes the pair first)
// and let accesses, wait_for_fenced_copies or a new copier take them.
void after_fork_in_child() {
  Registry& r = registry();
  for (auto& [storage, pair] : r.by_storage)
    if (pair->state == Pair::State::kCopying) {
      pair->state = Pair::State::kQueued;
      r.queue.push_front(pair);
    }
  r.copier_running = false;
  r.mutex.unlock();
}

// Copies outside the mutex. A target nobody else holds (its snapshot is gone) is not copied.
void copy_pair(Pair& pair) {
  if (pair.target.use_count() > 1)
    std::memcpy(pair.target->data(), pair.source->data(), pair.source->bytes());
}

// Under the mutex: the pair leaves the registry; the storages it held are released after the
// caller unlocks (a Storage's destructor returns memory to its allocator).
void finish_locked(Registry& r, Pair& pair, std::vector<std::shared_ptr<Storage>>& release) {
  pair.state = Pair::State::kDone;
  for (std::shared_ptr<Storage>* storage : {&pair.source, &pair.target}) {
    auto it = r.by_storage.find(storage->get());
    if (it != r.by_storage.end() && it->second.get() == &pair) r.by_storage.erase(it);
    (*storage)->fenced().store(false, std::memory_order_release);
    release.push_back(std::move(*storage));
  }
  g_pending_copies.fetch_sub(1, std::memory_order_release);
  r.done.notify_all();
}

// Copies `pair` (claimed by this thread, state kCopying) and finishes it. Called unlocked.
void run_claimed(Registry& r, Pair& pair) {
  copy_pair(pair);
  std::vector<std::shared_ptr<Storage>> release;
  std::lock_guard lock(r.mutex);
  finish_locked(r, pair, release);
}

void copier_loop() {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  for (;;) {
    r.work.wait(lock, [&] { return !r.paused && !r.queue.empty(); });
    std::shared_ptr<Pair> pair = std::move(r.queue.front());
    r.queue.pop_front();
    if (pair->state != Pair::State::kQueued) continue;  // an access copied it already
    pair->state = Pair::State::kCopying;
    lock.unlock();
    run_claimed(r, *pair);
    lock.lock();
  }
}

// Makes sure the pair holding `storage` (if any) is done; `lock` is held on entry and exit.
void finish_pair_of_locked(Registry& r, const Storage& storage,
                           std::unique_lock<std::mutex>& lock) {
  auto it = r.by_storage.find(&storage);
  if (it == r.by_storage.end()) return;
  std::shared_ptr<Pair> pair = it->second;
  if (pair->state == Pair::State::kQueued) {  // claim it: copy on this thread
    pair->state = Pair::State::kCopying;
    lock.unlock();
    run_claimed(r, *pair);
    lock.lock();
    return;
  }
  r.done.wait(lock, [&] { return pair->state == Pair::State::kDone; });
}

bool plain_host_tensor(const Tensor& t) {
  return t.defined() && !t.is_sparse() && t.device().is_cpu() && t.dtype() != DType::kString &&
         t.nbytes() > 0;
}

}  // namespace

namespace detail {

namespace {
thread_local int64_t t_fence_ns = 0;
}  // namespace

void fence_storage(Storage& storage) {
  if (!storage.fenced().load(std::memory_order_acquire)) return;
  const auto start = std::chrono::steady_clock::now();
  Registry& r = registry();
  {
    std::unique_lock lock(r.mutex);
    finish_pair_of_locked(r, storage, lock);
  }
  t_fence_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
}

}  // namespace detail

std::vector<Tensor> fenced_copies(const std::vector<Tensor>& sources,
                                  std::span<const size_t> order) {
  std::vector<size_t> sequence(order.begin(), order.end());
  if (sequence.empty())
    for (size_t i = 0; i < sources.size(); ++i) sequence.push_back(i);
  if (sequence.size() != sources.size())
    throw InvalidArgumentError("fenced_copies: the order must list every source once");
  std::vector<Tensor> copies(sources.size());
  const bool lazy = lazy_copies();
  std::vector<std::shared_ptr<Pair>> pairs;
  for (size_t index : sequence) {
    if (index >= sources.size() || copies[index].defined())
      throw InvalidArgumentError("fenced_copies: the order must list every source once");
    const Tensor& source = sources[index];
    if (!lazy || !plain_host_tensor(source)) {
      copies[index] = source.clone();
      continue;
    }
    // A deferred source (ops/deferred_fill.h) is computed now: the copier reads storages
    // directly, past the fence.
    (void)source.raw_data();
    copies[index] = Tensor::empty(source.shape(), source.dtype(), Device::cpu());
    auto pair = std::make_shared<Pair>();
    pair->source = detail::storage_of(source);
    pair->target = detail::storage_of(copies[index]);
    pairs.push_back(std::move(pair));
  }
  if (pairs.empty()) return copies;

  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  for (std::shared_ptr<Pair>& pair : pairs) {
    // A source still part of a pending pair (a snapshot of a snapshot, a storage saved twice, a
    // second save before the first was copied): finish that pair first.
    while (r.by_storage.count(pair->source.get())) finish_pair_of_locked(r, *pair->source, lock);
    r.by_storage[pair->source.get()] = pair;
    r.by_storage[pair->target.get()] = pair;
    pair->source->fenced().store(true, std::memory_order_relaxed);
    pair->target->fenced().store(true, std::memory_order_relaxed);
    g_pending_copies.fetch_add(1, std::memory_order_relaxed);
    r.queue.push_back(std::move(pair));
  }
  if (!r.copier_running) {
    std::thread(copier_loop).detach();
    r.copier_running = true;
  }
  r.work.notify_one();
  return copies;
}

int64_t fence_nanoseconds_on_this_thread() { return detail::t_fence_ns; }

bool lazy_copies() { return g_lazy.load(std::memory_order_relaxed); }
void set_lazy_copies(bool lazy) { g_lazy.store(lazy, std::memory_order_relaxed); }

int64_t pending_fenced_copies() { return g_pending_copies.load(std::memory_order_acquire); }

void wait_for_fenced_copies() {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  // Take queued pairs on this thread (the copier may be paused, or absent after a fork), then
  // wait for those being copied elsewhere.
  while (!r.by_storage.empty()) finish_pair_of_locked(r, *r.by_storage.begin()->first, lock);
}

void pause_fenced_copier(bool paused) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.paused = paused;
  r.work.notify_all();
}

}  // namespace est::ops
