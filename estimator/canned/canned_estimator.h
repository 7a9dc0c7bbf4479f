// The constructors every canned estimator class shares (tensorflow/estimator canned/dnn.py,
// linear.py, dnn_linear_combined.py, baseline.py: each class's __init__ builds its model_fn from
// its arguments and hands model_dir, config and warm_start_from to Estimator.__init__).
//
// A canned class is its options struct, whose model_fn(default_reduction) builds the model_fn;
// CannedEstimator joins the two:
//
//   using DNNClassifier = canned::CannedEstimator<DNNClassifierOptions>;
//   namespace compat::v1 { using DNNClassifier = canned::CompatV1<est::DNNClassifier>; }
//
// The TF2 class passes loss_reduction's default SUM_OVER_BATCH_SIZE to the options' model_fn,
// its tf.compat.v1 twin SUM (the only difference between the two); the *Estimator classes' head
// carries its own reduction, so their options ignore it. Each class keeps its own plain options
// struct, fields in TF's order, so that designated initializers read like TF's keyword arguments
// (a shared base struct would forbid them).
#pragma once

#include <optional>
#include <utility>

#include "checkpoint/warm_start.h"
#include "estimator/estimator.h"
#include "nn/losses.h"

namespace est::canned {

// The options' warm_start_from (moved out), or none for the classes TF gives no such argument.
template <class Options>
std::optional<checkpoint::WarmStartSettings> take_warm_start_from(Options& options) {
  if constexpr (requires { options.warm_start_from; })
    return std::move(options.warm_start_from);
  else
    return std::nullopt;
}

template <class Options>
class CannedEstimator : public Estimator {
 public:
  using OptionsType = Options;

  explicit CannedEstimator(Options options)
      : CannedEstimator(std::move(options), nn::Reduction::kSumOverBatchSize) {}

 protected:
  CannedEstimator(Options options, nn::Reduction default_reduction)
      : Estimator(options.model_fn(default_reduction), options.model_dir, std::move(options.config),
                  {}, take_warm_start_from(options)) {}
};

// tf.compat.v1's class of the TF2 class `Tf2Estimator`: loss_reduction SUM by default.
template <class Tf2Estimator>
class CompatV1 : public Tf2Estimator {
 public:
  explicit CompatV1(typename Tf2Estimator::OptionsType options)
      : Tf2Estimator(std::move(options), nn::Reduction::kSum) {}
};

}  // namespace est::canned
