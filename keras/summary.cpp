// Model::summary(): the table Keras 2.x prints (keras/utils/layer_utils.py print_summary, as in
// Keras 2.9 to 2.12): line length 65 and columns at [0.45, 0.85, 1.0] for a sequential-like
// model, else 98 and [0.3, 0.6, 0.7, 1.0] with "Connected to" ("['input_1[0][0]']"); each cell
// cut to its column and broken after "),", "},", "],", "',"; a blank row after each layer; the
// totals with thousands separators.
#include <fmt/format.h>

#include <map>

#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {
namespace {

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

// print_row: the cells laid out in columns ending at `positions`, over as many lines as needed.
void print_row(std::vector<std::string> cells, const std::vector<int>& positions,
               std::string& out) {
  auto any_left = [&] {
    for (const auto& cell : cells)
      if (!cell.empty()) return true;
    return false;
  };
  static const char* const kBreaks[] = {"),", "},", "],", "',"};
  while (any_left()) {
    std::string line;
    for (size_t col = 0; col < cells.size(); ++col) {
      int start = col > 0 ? positions[col - 1] : 0;
      int end = positions[col];
      bool last = col == positions.size() - 1;
      int space = last ? 0 : 2;
      int cutoff = end - start - space - (last ? 0 : 1);
      std::string fit = cells[col].substr(0, std::max(cutoff, 0));
      size_t best = std::string::npos;
      for (const char* brk : kBreaks) {
        size_t at = fit.find(brk);
        if (at != std::string::npos) best = std::min(best, at + 2);
      }
      if (best != std::string::npos) {
        cutoff = static_cast<int>(best);
        fit = fit.substr(0, best);
      }
      if (col == 0) line += " ";
      line += fit + std::string(space, ' ');
      cells[col] = cells[col].size() > static_cast<size_t>(std::max(cutoff, 0))
                       ? cells[col].substr(std::max(cutoff, 0))
                       : "";
      if (static_cast<int>(line.size()) < end) line += std::string(end - line.size(), ' ');
    }
    out += line + "\n";
  }
}

}  // namespace

std::string Model::summary() const {
  if (!built())
    throw FailedPreconditionError(fmt::format(
        "This model (\"{}\") has not yet been built. Build the model first by calling build() "
        "or by calling the model on a batch of data (fit, evaluate, predict), or start it with "
        "an InputLayer",
        name_));
  bool seq = sequential_like();
  int line_length = seq ? 65 : 98;
  std::vector<double> fractions =
      seq ? std::vector<double>{0.45, 0.85, 1.0} : std::vector<double>{0.3, 0.6, 0.70, 1.0};
  std::vector<int> positions;
  for (double f : fractions) positions.push_back(static_cast<int>(line_length * f));
  std::vector<std::string> header{"Layer (type)", "Output Shape", "Param #"};
  if (!seq) header.push_back("Connected to");

  std::string out = fmt::format("Model: \"{}\"\n", name_);
  out += std::string(line_length, '_') + "\n";
  print_row(header, positions, out);
  out += std::string(line_length, '=') + "\n";

  // Each layer's node in this graph (shared layers are not supported: one node each).
  std::map<const Layer*, std::shared_ptr<const Node>> node_of;
  for (const auto& node : nodes_) node_of.emplace(node->layer.get(), node);
  for (const auto& layer : layers()) {
    const auto& node = node_of.at(layer.get());
    std::vector<Shape> shapes;
    for (const auto& x : node->inputs) shapes.push_back(x.shape);
    int64_t params = 0;
    for (const auto& w : layer->weights(shapes)) params += ops::num_elements(w.shape);
    std::string shape = shape_tuple(node->output_shape);
    // An InputLayer's output_shape is a list of one shape in a functional model.
    if (!seq && node->inputs.empty()) shape = "[" + shape + "]";
    std::vector<std::string> cells{layer->name() + " (" + layer->class_name() + ")", shape,
                                   std::to_string(params)};
    if (!seq) {
      std::string connections = "[";
      for (size_t i = 0; i < node->inputs.size(); ++i)
        connections +=
            fmt::format("{}'{}[0][0]'", i > 0 ? ", " : "", node->inputs[i].node->layer->name());
      cells.push_back(connections + "]");
    }
    print_row(cells, positions, out);
    out += std::string(line_length, ' ') + "\n";
  }
  out += std::string(line_length, '=') + "\n";
  int64_t trainable = 0, non_trainable = 0;
  for (const auto& [name, w] : weights())
    (w.trainable ? trainable : non_trainable) += ops::num_elements(w.shape);
  out += fmt::format("Total params: {}\n", with_commas(trainable + non_trainable));
  out += fmt::format("Trainable params: {}\n", with_commas(trainable));
  out += fmt::format("Non-trainable params: {}\n", with_commas(non_trainable));
  out += std::string(line_length, '_') + "\n";
  return out;
}

}  // namespace est::keras
