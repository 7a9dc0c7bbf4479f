// Tensors whose bytes are computed when first touched: an op can hand out its result before
// computing it, and a later op that only needs something derived from it (a max pooling after a
// convolution, ops/conv_pool.h) can compute that directly from the recipe, so the full result is
// never written. The first Tensor::element_data() on the storage (behind data<T>() and
// raw_data(), the only way to a tensor's bytes, the fence of ops/copy_fence.h) runs the fill on
// the calling thread; other threads meeting it meanwhile wait. Nothing pending costs one atomic
// load per access. A pending tensor that dies unread is dropped with its recipe, never computed.
//
// A fill must take the pointers it writes on the thread it runs on (as every kernel does before
// splitting work), since other threads wait until it is done.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "ops/tensor.h"

namespace est::ops {

class Storage;

// A CPU tensor of `shape` and `dtype` whose bytes fill(t) writes (t: a handle on its storage)
// the first time anyone reads or writes them. `recipe` is what deferred_recipe returns until
// then to a caller asking for the same `kind` (the address of a tag of the recipe's type).
Tensor deferred_tensor(const Shape& shape, DType dtype, std::function<void(Tensor&)> fill,
                       std::shared_ptr<const void> recipe, const void* kind);

// The recipe of a tensor (or any tensor sharing its storage) whose fill has not run yet, when
// it is of `kind`; null once filled, and for every other tensor.
std::shared_ptr<const void> deferred_recipe(const Tensor& tensor, const void* kind);

// Deferred tensors still pending (tests).
int64_t pending_deferred_fills();

namespace detail {
// Pending fills; Tensor::element_data() calls fill_storage only when this is not zero.
extern std::atomic<int64_t> g_pending_fills;
// Runs the pending fill of `storage`, if any (or waits for the thread running it).
void fill_storage(Storage& storage);
// Drops the pending fill of a storage being destroyed (~Storage, while it is flagged).
void forget_storage(const Storage* storage);
// A dense tensor handle on `storage` (tensor.cpp holds TensorImpl).
Tensor tensor_on_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);
}  // namespace detail

}  // namespace est::ops
