// Fenced copies: deep copies of host tensors made on a background thread, with a fence in
// Tensor's byte accessor so that nobody sees either side of a copy before it is done.
//
// fenced_copies() allocates the destinations and registers each (source storage, destination
// storage) pair as pending; a background copier thread then copies them in the order given.
// Until a pair is copied, the first Tensor::element_data() (behind data<T>() and raw_data(), the
// only way to a tensor's bytes) on either storage finishes that copy first: the calling thread
// copies it itself when the copier has not started it, or waits for the copier when it has.
// So a writer of the source (an optimizer's in-place update, assign, copy_from, fill) cannot
// change the bytes before they are copied, and a reader of the destination (the checkpoint
// writer) sees the copied bytes. With nothing pending the fence costs one atomic load.
//
// Pending pairs hold both storages, so a source freed by its owner stays readable; a pair whose
// destination nobody holds any more (a snapshot destroyed early) is dropped without copying.
// Only host tensors of plain bytes are copied lazily; string, sparse, empty and device tensors
// are cloned on the caller's thread, as Tensor::clone does. EST_SNAPSHOT_COPY=eager (or
// set_lazy_copies(false)) clones everything on the caller's thread, for A/B comparisons.
//
// The copier reads and writes Storage::data() directly (it is not fenced). Code that keeps a
// pointer from data<T>() across a call that may snapshot its tensor bypasses the fence; nothing
// in the tree does (see bench/README.md, issue 32 item 5, for the audit).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ops/tensor.h"

namespace est::ops {

class Storage;

// Deep copies of `sources` (same shapes and dtypes, no autograd history), in the same order.
// `order` lists indices of `sources` in the order the copier should take them (all of them,
// each once); empty means 0, 1, 2, ...
std::vector<Tensor> fenced_copies(const std::vector<Tensor>& sources,
                                  std::span<const size_t> order = {});

// Whether fenced_copies copies lazily (default: yes, unless EST_SNAPSHOT_COPY=eager).
bool lazy_copies();
void set_lazy_copies(bool lazy);

// Copies registered and not yet done or dropped.
int64_t pending_fenced_copies();
// Blocks until no copy is pending (tests and benches).
void wait_for_fenced_copies();
// Nanoseconds the calling thread has spent in the fence (copying a pair it met, or waiting for
// the copier to finish one), since it started: the time a snapshot blocked it after the call.
int64_t fence_nanoseconds_on_this_thread();
// Tests: while paused, the copier takes no new pair, so only accesses finish copies.
void pause_fenced_copier(bool paused);

namespace detail {
// Pairs pending; Tensor::element_data() calls fence_storage only when this is not zero.
extern std::atomic<int64_t> g_pending_copies;
// Finishes the pending copy that reads or writes `storage`, if any.
void fence_storage(Storage& storage);
// The storage of a dense tensor (tensor.cpp holds TensorImpl).
std::shared_ptr<Storage> storage_of(const Tensor& tensor);
}  // namespace detail

}  // namespace est::ops
