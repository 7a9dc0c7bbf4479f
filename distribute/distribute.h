// distribute/: distribution strategies in one process and across worker processes (parameter
// servers included), the custom-training-loop API, and the cluster of a multi-process job
// (ClusterSpec, TF_CONFIG, SLURM).
#pragma once

#include "distribute/central_storage_strategy.h"
#include "distribute/cluster_spec.h"
#include "distribute/cross_device_ops.h"
#include "distribute/distributed_dataset.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_util.h"
#include "distribute/slurm.h"
#include "distribute/strategy.h"
#include "distribute/tf_config.h"
// The multi-worker runtime needs gRPC (meson option grpc, enabled by default).
#if EST_HAVE_GRPC
#include "distribute/collective_all_reduce.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/ps/parameter_server_strategy.h"
#endif
