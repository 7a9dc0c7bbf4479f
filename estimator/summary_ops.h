// Summaries and named tensors from inside model_fn, as tf.compat.v1.summary.scalar / histogram /
// image / text and tf.identity(x, name=...) (tensorflow/python/summary/summary.py,
// summary_op_util.py) give them to a TF1 model_fn:
//
//   est::summary::scalar("learning_rate", lr, ctx);
//   est::summary::histogram("logits", logits, ctx);
//   est::summary::image("input", images, ctx, /*max_outputs=*/2);
//   Tensor mean = est::identity(ops::mean(hidden), "hidden_mean", ctx);  // fetchable by name
//
// Tags follow TF: the name with characters outside [-/\w.] replaced by '_' and leading '/'
// stripped (clean_tag), prefixed by the current variable scope ("block1/loss"), made unique
// within the call as name scopes are ("loss", "loss_1"); an image summary's values are tagged
// "<tag>/image" when max_outputs is 1, else "<tag>/image/0", "<tag>/image/1", ...
//
// The values are recorded in the call's EstimatorContext (estimator/model_fn_records.h); in
// training the Estimator's SummarySaverHook writes those of every save_summary_steps-th step to
// model_dir's event file (TF's Scaffold.summary_op: every summary of the graph), in evaluation
// and prediction they are not written, as TF's Estimator writes only the eval metrics there.
// Called with a ctx that is not an Estimator's (a plain nn::ModelContext) they are a
// FailedPreconditionError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nn/model_context.h"
#include "ops/tensor.h"

namespace est {
namespace summary {

// A scalar (any tensor of one element). Returns the tag used.
std::string scalar(std::string_view name, const Tensor& tensor, ModelContext& ctx);
// A histogram of every element over TF's default buckets (NaN or infinity: InvalidArgumentError
// when written).
std::string histogram(std::string_view name, const Tensor& values, ModelContext& ctx);
// Images [batch, height, width, channels] (channels 1, 3 or 4): uint8 as is; float normalised
// per image as TF's ImageSummary op does (all values >= 0: scaled so the largest is 255; else
// shifted so 0 is at 127 and scaled so the smallest is 0 or the largest 255). The first
// `max_outputs` images of the batch are written.
std::string image(std::string_view name, const Tensor& images, ModelContext& ctx,
                  int max_outputs = 3);
// Text for TensorBoard's text plugin: a scalar string tensor, or a string.
std::string text(std::string_view name, const Tensor& text, ModelContext& ctx);
std::string text(std::string_view name, const std::string& text, ModelContext& ctx);

// TF's clean_tag: characters outside [-/\w.] become '_', leading '/' are stripped.
std::string clean_tag(std::string_view name);

}  // namespace summary

// tf.identity(tensor, name): returns `tensor` and records it under `name` (in the current
// scope, made unique within the call) for hooks to fetch by name, e.g.
// LoggingTensorHook({{"mean", "hidden_mean"}}, 10). "name:0" is accepted when fetching.
Tensor identity(const Tensor& tensor, std::string_view name, ModelContext& ctx);

}  // namespace est

namespace est {

class SummaryWriter;
struct SummaryValue;

namespace summary {
// Writes one recorded summary as TF's summary ops would have produced it (images normalised
// and tagged as above) at `step`.
void write(SummaryWriter& writer, const SummaryValue& value, int64_t step);
}  // namespace summary

}  // namespace est
