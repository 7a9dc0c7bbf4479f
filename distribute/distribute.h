// distribute/: distribution strategies in one process and the custom-training-loop API.
#pragma once

#include "distribute/central_storage_strategy.h"
#include "distribute/cross_device_ops.h"
#include "distribute/distributed_dataset.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/strategy.h"
