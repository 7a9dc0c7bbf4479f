// PsPlacement: which `ps` task holds each variable of a parameter-server job, as TF1's
// replica_device_setter decides it (tensorflow/python/training/device_setter.py), with the
// load-balancing strategies of tf.contrib.training (GreedyLoadBalancingStrategy with
// byte_size_load_fn) and the axis-0 partitioners of
// tensorflow/python/ops/partitioned_variables.py (fixed_size_partitioner,
// min_max_variable_partitioner), slices cut as variable_scope's _iter_slices cuts them.
//
// Variables are placed in creation order, each exactly once; the same order on every worker
// gives the same placement everywhere, as in TF. The Estimator creates `global_step` before
// model_fn runs, so under round-robin it lands on ps 0 and the next variable on ps 1; here
// `global_step` is always on ps 0 (and counted, as in TF). A partitioned variable becomes parts
// `<name>/part_<i>` of consecutive rows, the first (rows % parts) one row longer, each part
// placed like a variable of its own; a worker still sees one whole variable (the parts are
// joined when pulled, and a checkpoint holds the whole variable under its own name, as TF's
// saver writes a partitioned variable). Optimizer slots live beside their variable (part): the
// ps task that applies the update creates them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/tensor.h"

namespace est::distribute {

enum class PsLoadBalancing {
  kRoundRobin,      // replica_device_setter's default (_RoundRobinStrategy)
  kGreedyByteSize,  // GreedyLoadBalancingStrategy(num_ps, byte_size_load_fn)
};

// How many parts (along axis 0) a variable is cut into; 1 leaves it whole. Called with the
// variable's name, shape and dtype.
using Partitioner =
    std::function<int64_t(const std::string& name, const ops::Shape& shape, ops::DType dtype)>;

// tf.compat.v1.fixed_size_partitioner(num_shards, axis=0): min(num_shards, rows) parts.
// InvalidArgumentError when num_shards < 1.
Partitioner fixed_size_partitioner(int64_t num_shards);
// tf.compat.v1.min_max_variable_partitioner(max_partitions, axis=0, min_slice_size,
// bytes_per_string_element): as many parts as keep each at least min_slice_size bytes (a part
// is whole rows), at most max_partitions (0: no maximum) and at most the rows.
Partitioner min_max_variable_partitioner(int64_t max_partitions = 1,
                                         int64_t min_slice_size = 256 << 10,
                                         int64_t bytes_per_string_element = 16);

// One part of a variable and its owner.
struct PsShard {
  int ps = 0;             // the ps task's index
  std::string name;       // on the ps: the variable's name, or "<name>/part_<i>"
  int64_t row_begin = 0;  // rows [row_begin, row_end) of axis 0; [0, rows) when whole
  int64_t row_end = 0;
};

struct PsVariable {
  std::string name;
  ops::Shape shape;
  ops::DType dtype = ops::DType::kF32;
  std::vector<PsShard> shards;  // one when whole
  bool partitioned() const { return shards.size() > 1; }
};

class PsPlacement {
 public:
  // InvalidArgumentError when num_ps < 1. `partitioner` (empty: none) is asked about every
  // variable of rank >= 1 except global_step.
  PsPlacement(int num_ps, PsLoadBalancing balancing = PsLoadBalancing::kRoundRobin,
              Partitioner partitioner = {});

  int num_ps() const { return num_ps_; }
  // Places a new variable (or returns where an already placed one is; a different shape or
  // dtype is an InvalidArgumentError naming the variable). The reference (and find's pointer)
  // stays valid while more variables are placed.
  const PsVariable& place(const std::string& name, const ops::Shape& shape, ops::DType dtype);
  // Null when `name` was never placed.
  const PsVariable* find(const std::string& name) const;
  // Every placed variable, in creation order.
  const std::deque<PsVariable>& variables() const { return variables_; }
  // Bytes placed on each ps task so far (GreedyLoadBalancing's loads).
  const std::vector<int64_t>& loads() const { return loads_; }

 private:
  int next_ps(int64_t bytes);

  int num_ps_;
  PsLoadBalancing balancing_;
  Partitioner partitioner_;
  int next_ = 0;                      // round-robin
  std::vector<int64_t> loads_;        // [num_ps] bytes
  std::deque<PsVariable> variables_;  // a deque: place()'s references outlive later places
  std::unordered_map<std::string, size_t> index_;
};

// "ps 1 holds dense/kernel/part_1 (rows 5-9)": for messages and logs.
std::string describe(const PsVariable& variable);

}  // namespace est::distribute
