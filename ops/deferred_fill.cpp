// Deferred tensors (deferred_fill.h): the registry of pending fills, keyed by storage, and the
// hooks Tensor::element_data() and ~Storage call while fills are pending. A pending storage is
// flagged with Storage::fenced(), the flag ops/copy_fence.h uses for its pending copies, so the
// accesses of every other storage skip the mutex (a storage is never both: fenced_copies
// finishes a deferred source's fill before registering it, and its targets are new tensors).
#include "ops/deferred_fill.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "ops/copy_fence.h"
#include "ops/storage.h"

namespace est::ops {
namespace detail {
std::atomic<int64_t> g_pending_fills{0};
}  // namespace detail

namespace {

using detail::g_pending_fills;

struct Fill {
  enum class State { kPending, kFilling };
  std::weak_ptr<Storage> storage;
  Shape shape;
  DType dtype = DType::kF32;
  std::function<void(Tensor&)> fill;
  std::shared_ptr<const void> recipe;
  const void* kind = nullptr;
  State state = State::kPending;
  std::thread::id filler;
};

struct Registry {
  std::mutex mutex;
  std::condition_variable done;  // a fill finished (or failed)
  std::unordered_map<const Storage*, std::shared_ptr<Fill>> by_storage;
};

// Leaked on purpose, like the allocators: storages may die while static objects do.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Under the mutex: `storage`'s entry leaves the registry; returned so that the caller destroys
// it (and the tensors its fill holds, whose storages come back here) after unlocking.
std::shared_ptr<Fill> remove_locked(Registry& r, const Storage* storage) {
  auto it = r.by_storage.find(storage);
  if (it == r.by_storage.end()) return nullptr;
  std::shared_ptr<Fill> entry = std::move(it->second);
  r.by_storage.erase(it);
  g_pending_fills.fetch_sub(1, std::memory_order_release);
  return entry;
}

}  // namespace

Tensor deferred_tensor(const Shape& shape, DType dtype, std::function<void(Tensor&)> fill,
                       std::shared_ptr<const void> recipe, const void* kind) {
  if (dtype == DType::kString)
    throw InvalidArgumentError("deferred_tensor: string tensors cannot be deferred");
  Tensor tensor = Tensor::empty(shape, dtype, Device::cpu());
  if (tensor.nbytes() == 0) {  // nothing to defer
    fill(tensor);
    return tensor;
  }
  std::shared_ptr<Storage> storage = detail::storage_of(tensor);
  auto entry = std::make_shared<Fill>();
  entry->storage = storage;
  entry->shape = shape;
  entry->dtype = dtype;
  entry->fill = std::move(fill);
  entry->recipe = std::move(recipe);
  entry->kind = kind;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.by_storage[storage.get()] = std::move(entry);
  storage->fenced().store(true, std::memory_order_relaxed);
  g_pending_fills.fetch_add(1, std::memory_order_release);
  return tensor;
}

std::shared_ptr<const void> deferred_recipe(const Tensor& tensor, const void* kind) {
  if (g_pending_fills.load(std::memory_order_acquire) == 0 || !tensor.defined() ||
      tensor.is_sparse())
    return nullptr;
  const std::shared_ptr<Storage> storage = detail::storage_of(tensor);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_storage.find(storage.get());
  if (it == r.by_storage.end() || it->second->state != Fill::State::kPending ||
      it->second->kind != kind)
    return nullptr;
  return it->second->recipe;
}

int64_t pending_deferred_fills() { return g_pending_fills.load(std::memory_order_acquire); }

namespace detail {

void fill_storage(Storage& storage) {
  if (!storage.fenced().load(std::memory_order_acquire)) return;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  for (;;) {
    auto it = r.by_storage.find(&storage);
    if (it == r.by_storage.end()) return;
    std::shared_ptr<Fill> entry = it->second;
    if (entry->state == Fill::State::kPending) break;
    if (entry->filler == std::this_thread::get_id()) return;  // the fill's own writes
    // Another thread fills it: wait until it is done, or failed (then claim it here).
    r.done.wait(lock, [&] {
      return !r.by_storage.count(&storage) || entry->state == Fill::State::kPending;
    });
  }
  std::shared_ptr<Fill> entry = r.by_storage.at(&storage);
  entry->state = Fill::State::kFilling;
  entry->filler = std::this_thread::get_id();
  // The caller holds the storage (it is reading it), so the weak pointer locks.
  Tensor target = tensor_on_storage(entry->storage.lock(), entry->shape, entry->dtype);
  lock.unlock();
  try {
    entry->fill(target);
  } catch (...) {  // still pending: the next access tries again
    lock.lock();
    entry->state = Fill::State::kPending;
    entry->filler = {};
    r.done.notify_all();
    throw;
  }
  lock.lock();
  std::shared_ptr<Fill> finished = remove_locked(r, &storage);
  storage.fenced().store(false, std::memory_order_release);
  r.done.notify_all();
  lock.unlock();
  // `finished` and `entry` (the recipe's tensors) are released here, unlocked.
}

void forget_storage(const Storage* storage) {
  if (g_pending_fills.load(std::memory_order_acquire) == 0) return;
  Registry& r = registry();
  std::shared_ptr<Fill> dropped;
  {
    std::lock_guard lock(r.mutex);
    dropped = remove_locked(r, storage);
  }
  // Destroyed unlocked: the fill's tensors may free storages that come back here.
}

}  // namespace detail

}  // namespace est::ops
