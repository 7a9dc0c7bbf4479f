// What histogram and image summaries store, computed as TensorFlow computes it:
//   - histograms over TF's default bucket limits (tensorflow/core/lib/histogram/histogram.cc:
//     0, then +-1e-12 growing by 10% up to 1e20, then +-DBL_MAX), runs of empty buckets
//     collapsed into one, as Histogram::EncodeToProto does without preserve_zero_buckets;
//   - images as 8-bit PNG (grayscale, grayscale + alpha, RGB or RGBA), deflated with zlib,
//     which TensorBoard's image dashboard decodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace est {

// HistogramProto's fields.
struct Histogram {
  double min = 0;
  double max = 0;
  double num = 0;
  double sum = 0;
  double sum_squares = 0;
  std::vector<double> bucket_limit;  // bucket i holds [bucket_limit[i-1], bucket_limit[i])
  std::vector<double> bucket;        // counts
};

// TF's default bucket limits, ascending.
const std::vector<double>& default_histogram_bucket_limits();
// The histogram of `values`. NaN or infinity is an InvalidArgumentError naming `tag`, as TF's
// HistogramSummary op rejects them. No values: min DBL_MAX, max -DBL_MAX and one empty bucket.
Histogram histogram_of(const std::vector<double>& values, const std::string& tag);

// `pixels` row-major [height, width, channels], channels 1 to 4, encoded as a PNG file.
std::string encode_png(const std::vector<uint8_t>& pixels, int64_t height, int64_t width,
                       int channels);

}  // namespace est
