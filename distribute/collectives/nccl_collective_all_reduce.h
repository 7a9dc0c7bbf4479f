// CollectiveAllReduce with communication = NCCL: the workers' GPUs in one NCCL communicator.
//
// Every task makes one rank per local GPU (rank = worker index x local GPUs + local index,
// nranks = workers x local GPUs) with ncclCommInitRankConfig, the unique id coming from the
// chief through the coordination service (distribute/collectives/nccl_unique_id.h). Communicators
// are non-blocking: the task polls ncclCommGetAsyncError together with the job's health and a
// deadline, so a peer that never arrives, dies or fails makes the job's error (the one the ring
// reports, naming the task) or a DeadlineExceededError, never a hang; the communicator is then
// aborted (ncclCommAbort) and every later collective throws that error.
//
// Tensors on a GPU are all-reduced (sum; the callers apply a mean's factor before or after)
// and broadcast from the chief with ncclAllReduce / ncclBroadcast on each device's compute
// stream, as they are (no host copies), one NCCL group per call (NCCL fuses the small ones, so
// there is no packing); the task then watches the collective until an event after it has
// completed. Host tensors (integers, what the strategy hands over through host copies:
// strategy.reduce, the gradients of Strategy::all_reduce_gradients) and all-gather (strings)
// take the ring. With several local GPUs, the reduction over the local replicas comes first
// (in-process NcclAllReduce) and only replica 0's sums cross the workers: the other local ranks
// take part with zeros (correct, at the cost of their extra traffic). Reductions started in
// the background (start_reduce) run at once on the caller's thread.
// Follows tensorflow/python/distribute/cross_device_ops.py (CollectiveAllReduce with
// CommunicationImplementation.NCCL) and tensorflow/core/nccl/nccl_manager.cc (the unique id
// from the group leader; abort on error).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distribute/collectives/collective_all_reduce.h"

namespace est::distribute {

// The NCCL cross-device ops of a job (runtime non-null) on this task's GPU `devices`; makes
// the communicator, waiting at most `rendezvous_timeout` for every task's ranks. Only in
// builds with CUDA (EST_HAVE_CUDA).
std::shared_ptr<CollectiveAllReduce> make_nccl_collective_all_reduce(
    std::shared_ptr<ClusterRuntime> runtime, CommunicationOptions options,
    const std::vector<ops::Device>& devices, std::chrono::milliseconds rendezvous_timeout);

// The PCI bus ids of `devices` (GPUs), as NCCL tells GPUs apart ("0000:1A:00.0").
std::vector<std::string> gpu_bus_ids(const std::vector<ops::Device>& devices);

}  // namespace est::distribute
