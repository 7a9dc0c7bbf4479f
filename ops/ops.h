// Everything in ops/, for users and the layers above.
#pragma once

#include "ops/array_ops.h"
#include "ops/autograd.h"
#include "ops/backend.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/error.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/nn_ops.h"
#include "ops/random.h"
#include "ops/registry.h"
#include "ops/sparse.h"
#include "ops/tensor.h"
