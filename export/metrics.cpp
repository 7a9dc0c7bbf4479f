// The metric registry and its Prometheus text (see metrics.h). Followed: TF Serving's
// util/prometheus_exporter.cc (names, lines, escapes) and TensorFlow's lib/monitoring/
// (exponential buckets, a histogram's buckets as lib/histogram/histogram.cc fills them).
#include "export/metrics.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "ops/error.h"

namespace est::serving::metrics {

std::vector<double> exponential_buckets(double scale, double growth, int count) {
  std::vector<double> limits;
  double limit = scale;
  for (int i = 0; i < count; ++i, limit *= growth) limits.push_back(limit);
  return limits;
}

namespace {

// [a-zA-Z0-9_] kept, anything else `replacement`; a leading digit gets a '_' before it.
std::string sanitized(std::string_view name, char replacement) {
  std::string out;
  for (const char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : replacement;
  if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(0, "_");
  return out;
}

std::string label_value(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";  // a line break would end the sample's line
      continue;
    }
    out += c;
  }
  return out;
}

// name="value",... for a cell's labels.
std::string label_list(const Descriptor& descriptor, const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i)
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", sanitized(descriptor.labels[i], '_'),
                       label_value(values[i]));
  return out;
}

// A number as TF's StrCat writes it (six significant digits).
std::string six_digits(double value) { return fmt::format("{:.6g}", value); }

}  // namespace

std::string prometheus_name(std::string_view tf_name) { return sanitized(tf_name, ':'); }

Registry::Registry(const std::vector<Descriptor>& descriptors) {
  for (const Descriptor& descriptor : descriptors) {
    if (descriptor.kind == Kind::kHistogram &&
        (descriptor.buckets.empty() ||
         !std::is_sorted(descriptor.buckets.begin(), descriptor.buckets.end())))
      throw InvalidArgumentError(
          fmt::format("metric {}: a histogram needs increasing bucket limits", descriptor.name));
    if (!metrics_.emplace(descriptor.name, Metric{descriptor, {}}).second)
      throw InvalidArgumentError(fmt::format("metric {} is defined twice", descriptor.name));
  }
}

Registry::Cell& Registry::cell(std::string_view name, const std::vector<std::string>& labels,
                               Kind kind) {
  auto found = metrics_.find(name);
  if (found == metrics_.end())
    throw InvalidArgumentError(fmt::format("no metric {} is defined", name));
  Metric& metric = found->second;
  if (metric.descriptor.kind != kind)
    throw InvalidArgumentError(fmt::format("metric {} is of another kind", name));
  if (labels.size() != metric.descriptor.labels.size())
    throw InvalidArgumentError(fmt::format("metric {} takes {} label values, not {}", name,
                                           metric.descriptor.labels.size(), labels.size()));
  Cell& cell = metric.cells[labels];
  if (kind == Kind::kHistogram && cell.counts.empty())
    cell.counts.assign(metric.descriptor.buckets.size() + 1, 0);
  return cell;
}

void Registry::increment(std::string_view name, const std::vector<std::string>& labels,
                         int64_t by) {
  std::lock_guard lock(mutex_);
  cell(name, labels, Kind::kCounter).value += by;
}

void Registry::set(std::string_view name, const std::vector<std::string>& labels, int64_t value) {
  std::lock_guard lock(mutex_);
  cell(name, labels, Kind::kGauge).value = value;
}

void Registry::observe(std::string_view name, const std::vector<std::string>& labels,
                       double value) {
  std::lock_guard lock(mutex_);
  Cell& histogram = cell(name, labels, Kind::kHistogram);
  const std::vector<double>& limits = metrics_.find(name)->second.descriptor.buckets;
  const size_t bucket = std::upper_bound(limits.begin(), limits.end(), value) - limits.begin();
  ++histogram.counts[bucket];
  ++histogram.value;
  histogram.sum += value;
}

int64_t Registry::value(std::string_view name, const std::vector<std::string>& labels) const {
  std::lock_guard lock(mutex_);
  auto found = metrics_.find(name);
  if (found == metrics_.end()) return 0;
  auto cell = found->second.cells.find(labels);
  return cell == found->second.cells.end() ? 0 : cell->second.value;
}

std::string Registry::exposition() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [tf_name, metric] : metrics_) {
    const std::string name = prometheus_name(tf_name);
    const Descriptor& descriptor = metric.descriptor;
    const char* type = descriptor.kind == Kind::kCounter ? "counter"
                       : descriptor.kind == Kind::kGauge ? "gauge"
                                                         : "histogram";
    out += fmt::format("# TYPE {} {}\n", name, type);
    for (const auto& [values, cell] : metric.cells) {
      const std::string labels = label_list(descriptor, values);
      if (descriptor.kind != Kind::kHistogram) {
        out += fmt::format("{}{{{}}} {}\n", name, labels, cell.value);
        continue;
      }
      int64_t cumulative = 0;
      for (size_t i = 0; i < cell.counts.size(); ++i) {
        cumulative += cell.counts[i];
        const std::string limit =
            i < descriptor.buckets.size() ? six_digits(descriptor.buckets[i]) : "+Inf";
        out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels,
                           labels.empty() ? "" : ",", limit, cumulative);
      }
      out += fmt::format("{}_sum{{{}}} {}\n", name, labels, six_digits(cell.sum));
      out += fmt::format("{}_count{{{}}} {}\n", name, labels, cumulative);
    }
  }
  return out;
}

}  // namespace est::serving::metrics
