// Host -> device copies that overlap compute, for input pipelines (data/prefetch_to_device):
// the copy is queued on the device's copy stream through a pinned buffer and the caller gets
// an event instead of a compute stream that already waits; whoever uses the tensor later makes
// the compute stream wait for that event (no host block), so kernels queued meanwhile are not
// held up behind a copy they do not need.
//
// Plain header (no CUDA types), declared in every build; the functions exist only where
// EST_HAVE_CUDA is 1.
#pragma once

#include "ops/cuda/runtime.h"
#include "ops/tensor.h"

namespace est::ops::cuda {

// Queues the copy of host tensor `source` into `target` (same shape and dtype, on a GPU): the
// bytes go into a pinned buffer now, then to the device on its copy stream, which first waits
// for the work already queued on the compute stream (target's block may have been freed by it).
// target's block is not reused before the copy has finished, even if target is freed first.
void copy_to_device_async(const Tensor& source, Tensor& target);

// An event recorded on `device`'s copy stream now: the copies queued so far have finished.
Event copy_stream_event(int device);

// Makes `device`'s compute stream wait for `event` without blocking the host, and gives the
// event back to the pool.
void compute_stream_wait(int device, Event event);

}  // namespace est::ops::cuda
