// est::summary::* and est::identity: recording into the call's EstimatorContext with TF's tags,
// and writing a recorded value (TF's ImageSummary normalisation, summary_image_op.cc).
#include "estimator/summary_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "estimator/model_fn_records.h"
#include "estimator/params.h"
#include "estimator/summary_writer.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est {
namespace {

EstimatorContext& recording_context(ModelContext& ctx, const char* what) {
  auto* estimator_ctx = dynamic_cast<EstimatorContext*>(&ctx);
  if (!estimator_ctx)
    throw FailedPreconditionError(fmt::format(
        "{}: ctx is not an Estimator's model_fn context; summaries and named tensors are "
        "recorded only inside a model_fn an Estimator calls",
        what));
  return *estimator_ctx;
}

// The full, unique name: cleaned, under the current scope, "_1", "_2", ... when used already
// in this call.
std::string unique_name(EstimatorContext& ctx, std::string_view name, const char* what) {
  std::string cleaned = summary::clean_tag(name);
  if (cleaned.empty())
    throw InvalidArgumentError(fmt::format("{}: the name '{}' is empty once cleaned", what, name));
  std::string scope = ctx.current_scope();
  std::string full = scope.empty() ? cleaned : scope + "/" + cleaned;
  int64_t& count = ctx.records().name_counts[full];
  std::string result = count == 0 ? full : fmt::format("{}_{}", full, count);
  ++count;
  return result;
}

// A snapshot (the value at this point of the step: a variable's is updated later in the step),
// on the tensor's device; moved to the host only when written.
Tensor snapshot(const Tensor& tensor, const char* what, std::string_view name) {
  if (!tensor.defined())
    throw InvalidArgumentError(fmt::format("{} '{}': the tensor is undefined", what, name));
  if (is_string(tensor.dtype())) return tensor;  // strings are never written in place
  return tensor.clone();
}

std::string record(ModelContext& ctx, SummaryValue::Kind kind, std::string_view name,
                   const Tensor& tensor, const char* what, int max_outputs = 3) {
  EstimatorContext& estimator_ctx = recording_context(ctx, what);
  std::string tag = unique_name(estimator_ctx, name, what);
  estimator_ctx.records().summaries.push_back({.kind = kind,
                                               .tag = tag,
                                               .value = snapshot(tensor, what, name),
                                               .max_outputs = max_outputs});
  return tag;
}

// One image [height, width, channels] of a float batch, as TF's NormalizeFloatImage: the
// affine map from the finite pixels' range into uint8 (truncated), non-finite pixels red.
std::vector<uint8_t> normalise(const std::vector<double>& values, int64_t pixels, int channels) {
  auto finite = [&](int64_t p) {
    for (int c = 0; c < channels; ++c)
      if (!std::isfinite(values[p * channels + c])) return false;
    return true;
  };
  float low = std::numeric_limits<float>::infinity(), high = -low;
  for (int64_t p = 0; p < pixels; ++p)
    if (finite(p))
      for (int c = 0; c < channels; ++c) {
        low = std::min(low, static_cast<float>(values[p * channels + c]));
        high = std::max(high, static_cast<float>(values[p * channels + c]));
      }
  constexpr float kZeroThreshold = 1e-6f;
  float scale, offset;
  if (low < 0) {
    float max_abs = std::max(std::abs(low), std::abs(high));
    scale = max_abs < kZeroThreshold ? 0.0f : 127.0f / max_abs;
    offset = 128.0f;
  } else {
    scale = high < kZeroThreshold ? 0.0f : 255.0f / high;
    offset = 0.0f;
  }
  const uint8_t bad_color[4] = {255, 0, 0, 255};
  std::vector<uint8_t> out(values.size());
  for (int64_t p = 0; p < pixels; ++p) {
    bool ok = finite(p);
    for (int c = 0; c < channels; ++c)
      out[p * channels + c] =
          ok ? static_cast<uint8_t>(static_cast<float>(values[p * channels + c]) * scale + offset)
             : bad_color[c];
  }
  return out;
}

void write_images(SummaryWriter& writer, const SummaryValue& value, int64_t step) {
  const Tensor& images = value.value;
  const Shape& shape = images.shape();
  int64_t batch = shape[0], height = shape[1], width = shape[2];
  int channels = static_cast<int>(shape[3]);
  int64_t pixels = height * width;
  int64_t count = std::min<int64_t>(batch, value.max_outputs);
  std::vector<double> all = images.to_vector<double>();
  for (int64_t i = 0; i < count; ++i) {
    std::vector<double> one(all.begin() + i * pixels * channels,
                            all.begin() + (i + 1) * pixels * channels);
    std::vector<uint8_t> bytes;
    if (images.dtype() == DType::kU8)
      bytes.assign(one.begin(), one.end());
    else
      bytes = normalise(one, pixels, channels);
    std::string tag =
        value.max_outputs == 1 ? value.tag + "/image" : fmt::format("{}/image/{}", value.tag, i);
    writer.add_image(tag, bytes, height, width, channels, step);
  }
}

}  // namespace

namespace summary {

std::string clean_tag(std::string_view name) {
  std::string cleaned;
  for (char c : name) {
    bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '/' || c == '.';
    cleaned += keep ? c : '_';
  }
  size_t start = cleaned.find_first_not_of('/');
  cleaned = start == std::string::npos ? std::string() : cleaned.substr(start);
  if (cleaned != name)
    log::info("Summary name {} is illegal; using {} instead.", std::string(name), cleaned);
  return cleaned;
}

std::string scalar(std::string_view name, const Tensor& tensor, ModelContext& ctx) {
  if (tensor.defined() && tensor.numel() != 1)
    throw InvalidArgumentError(fmt::format(
        "summary::scalar '{}': the tensor has shape {}; a scalar summary needs one value "
        "(reduce it, or use summary::histogram)",
        name, ops::shape_str(tensor.shape())));
  return record(ctx, SummaryValue::Kind::kScalar, name, tensor, "summary::scalar");
}

std::string histogram(std::string_view name, const Tensor& values, ModelContext& ctx) {
  if (values.defined() && is_string(values.dtype()))
    throw InvalidArgumentError(
        fmt::format("summary::histogram '{}': the tensor holds strings; it needs numbers", name));
  return record(ctx, SummaryValue::Kind::kHistogram, name, values, "summary::histogram");
}

std::string image(std::string_view name, const Tensor& images, ModelContext& ctx, int max_outputs) {
  if (images.defined()) {
    const Shape& shape = images.shape();
    if (shape.size() != 4 || (shape[3] != 1 && shape[3] != 3 && shape[3] != 4))
      throw InvalidArgumentError(fmt::format(
          "summary::image '{}': images must be [batch, height, width, channels] with 1, 3 or 4 "
          "channels, got shape {}",
          name, ops::shape_str(shape)));
    if (is_string(images.dtype()) || images.dtype() == DType::kBool)
      throw InvalidArgumentError(
          fmt::format("summary::image '{}': images must be uint8 or floating, got {}", name,
                      dtype_name(images.dtype())));
  }
  if (max_outputs < 1)
    throw InvalidArgumentError(fmt::format(
        "summary::image '{}': max_outputs must be at least 1, got {}", name, max_outputs));
  return record(ctx, SummaryValue::Kind::kImage, name, images, "summary::image", max_outputs);
}

std::string text(std::string_view name, const Tensor& text, ModelContext& ctx) {
  if (text.defined() && (!is_string(text.dtype()) || text.numel() != 1))
    throw InvalidArgumentError(
        fmt::format("summary::text '{}': needs a scalar string tensor, got {} of shape {}", name,
                    dtype_name(text.dtype()), ops::shape_str(text.shape())));
  return record(ctx, SummaryValue::Kind::kText, name, text, "summary::text");
}

std::string text(std::string_view name, const std::string& value, ModelContext& ctx) {
  return text(name, Tensor::from_vector(std::vector<std::string>{value}, Shape{}), ctx);
}

void write(SummaryWriter& writer, const SummaryValue& recorded, int64_t step) {
  SummaryValue value = recorded;
  value.value = recorded.value.to(Device{});
  switch (value.kind) {
    case SummaryValue::Kind::kScalar:
      writer.add_scalar(value.tag, value.value.item(), step);
      break;
    case SummaryValue::Kind::kHistogram:
      writer.add_histogram(value.tag, value.value.to_vector<double>(), step);
      break;
    case SummaryValue::Kind::kImage:
      write_images(writer, value, step);
      break;
    case SummaryValue::Kind::kText:
      writer.add_text(value.tag, value.value.data<std::string>()[0], step);
      break;
  }
}

}  // namespace summary

Tensor identity(const Tensor& tensor, std::string_view name, ModelContext& ctx) {
  EstimatorContext& estimator_ctx = recording_context(ctx, "identity");
  if (!tensor.defined())
    throw InvalidArgumentError(fmt::format("identity '{}': the tensor is undefined", name));
  std::string full = unique_name(estimator_ctx, name, "identity");
  estimator_ctx.records().named_tensors[full] = snapshot(tensor, "identity", name);
  return tensor;
}

}  // namespace est
