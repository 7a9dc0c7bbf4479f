// distribute/: distribution strategies in one process and across worker processes (parameter
// servers included), the custom-training-loop API, and the cluster of a multi-process job
// (ClusterSpec, TF_CONFIG, SLURM).
#pragma once

#include "distribute/central_storage_strategy.h"
#include "distribute/cluster/cluster_spec.h"
#include "distribute/cluster/multi_worker_util.h"
#include "distribute/cluster/slurm.h"
#include "distribute/cluster/tf_config.h"
#include "distribute/collectives/cross_device_ops.h"
#include "distribute/distributed_dataset.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/strategy.h"
// The multi-worker runtime needs gRPC (meson option grpc, enabled by default).
#if EST_HAVE_GRPC
#include "distribute/collectives/collective_all_reduce.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/ps/parameter_server_strategy.h"
#endif
