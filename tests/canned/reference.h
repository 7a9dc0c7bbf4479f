// Independent references for the heads' tests, written from TF's formulas (not from est's
// code): per-example losses, weighted means, and the area under the ROC and PR curves as
// Keras's AUC computes it when every score falls in its own threshold bin (then the curve's
// points are the cuts between consecutive distinct scores, which is what is computed here).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace heads_reference {

inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
// -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x))
inline double sigmoid_cross_entropy(double z, double x) {
  return -z * std::log(sigmoid(x)) - (1 - z) * std::log(1 - sigmoid(x));
}
inline double weighted_mean(const std::vector<double>& v, const std::vector<double>& w) {
  double num = 0, den = 0;
  for (size_t i = 0; i < v.size(); ++i) num += v[i] * w[i], den += w[i];
  return num / den;
}

struct Counts {
  double tp = 0, fp = 0, fn = 0, tn = 0;
};
// Counts with "predicted positive" meaning score > threshold.
inline Counts counts_above(double threshold, const std::vector<double>& labels,
                           const std::vector<double>& scores, const std::vector<double>& w) {
  Counts c;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool pos = scores[i] > threshold, label = labels[i] > 0;
    (label ? (pos ? c.tp : c.fn) : (pos ? c.fp : c.tn)) += w[i];
  }
  return c;
}
// The curve's points from "everything positive" to "nothing positive".
inline std::vector<Counts> curve(const std::vector<double>& labels,
                                 const std::vector<double>& scores, const std::vector<double>& w) {
  std::vector<double> cuts = scores;
  std::sort(cuts.begin(), cuts.end());
  std::vector<Counts> out{counts_above(-1.0, labels, scores, w)};
  for (double s : cuts) out.push_back(counts_above(s, labels, scores, w));
  return out;
}

// Trapezoidal ROC AUC (Keras "interpolation" for ROC).
inline double roc_auc(const std::vector<double>& labels, const std::vector<double>& scores,
                      const std::vector<double>& w) {
  const std::vector<Counts> c = curve(labels, scores, w);
  double area = 0;
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    const double tpr0 = c[i].tp / (c[i].tp + c[i].fn),
                 tpr1 = c[i + 1].tp / (c[i + 1].tp + c[i + 1].fn);
    const double fpr0 = c[i].fp / (c[i].fp + c[i].tn),
                 fpr1 = c[i + 1].fp / (c[i + 1].fp + c[i + 1].tn);
    area += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
  }
  return area;
}

// PR AUC by Davis & Goadrich's interpolation, as Keras's AUC(curve='PR') sums it: between two
// points precision follows tp / (tp + fp) with tp linear in tp + fp.
inline double pr_auc(const std::vector<double>& labels, const std::vector<double>& scores,
                     const std::vector<double>& w) {
  const std::vector<Counts> c = curve(labels, scores, w);
  const double positives = c[0].tp + c[0].fn;
  double area = 0;
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    const double dtp = c[i].tp - c[i + 1].tp;
    const double p0 = c[i].tp + c[i].fp, p1 = c[i + 1].tp + c[i + 1].fp;
    if (p0 - p1 <= 0) continue;  // no change: the step adds nothing
    const double slope = dtp / (p0 - p1);
    const double intercept = c[i + 1].tp - slope * p1;
    const double ratio = (p0 > 0 && p1 > 0) ? p0 / p1 : 1.0;
    area += slope * (dtp + intercept * std::log(ratio)) / positives;
  }
  return area;
}

}  // namespace heads_reference
