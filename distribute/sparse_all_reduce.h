// Row-sparse gradients (IndexedSlices) in a strategy's all-reduce. TensorFlow's cross-device
// ops (tensorflow/python/distribute/cross_device_ops.py, cross_device_utils.py) reduce
// IndexedSlices by gathering every replica's indices and values (all_gather) rather than
// densifying them; here a gradient is gathered or densified, whichever moves fewer bytes: n
// rows of a 1M-row table move n rows, a gradient touching most of a small table moves it dense.
//
// The gather rides on the all-reduce the strategy already has (local replica threads, then the
// workers): every replica writes its rows at its own offset of a zero buffer as long as all the
// replicas' rows, and the sum of those buffers is their concatenation (adding zeros is exact).
// A first small all-reduce tells every replica every other's row counts, so all of them decide
// alike. Duplicated rows across replicas are summed later by the optimizer (sum_duplicates).
#pragma once

#include <vector>

#include "nn/optimizer.h"

namespace est::distribute {

class ReplicaContext;

// What gathering a row-sparse gradient costs against reducing it dense, in bytes, given every
// replica's row count: gathered = rows * (8 + row bytes), dense = the variable's bytes.
bool gather_moves_fewer_bytes(int64_t total_rows, int64_t row_elements, int64_t dense_elements,
                              size_t element_bytes);

// Every replica calls it with its gradients, in the same order (a collective when any is
// row-sparse). Afterwards each row-sparse gradient is either every replica's rows concatenated,
// values times `scale`, still row-sparse, or made dense for the caller's dense all-reduce
// (which applies `scale`).
void gather_row_sparse_gradients(ReplicaContext& replica, std::vector<nn::GradAndVar>& grads,
                                 double scale);

}  // namespace est::distribute
