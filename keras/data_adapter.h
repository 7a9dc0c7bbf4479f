// The (x, y) a Keras dataset yields, for models with several inputs or outputs (Keras 2.x
// keras/engine/data_adapter.py, pack_x_y_sample_weight / unpack_x_y_sample_weight; the
// structures compile_utils.py conforms to the model's outputs).
//
// Keras takes x as one tensor, a map keyed by the Input names or a tuple in input order, and y as
// one tensor (every output takes it), a map keyed by the output names (Model::output_names()) or
// a tuple in output order. est's data::Element holds a features map and one labels tensor, so
// pack_x_y puts the parts that do not fit there in the features map under names that no Keras
// layer can have ('#' is not allowed in TensorFlow's op names, hence in Keras's layer names):
//   x's i-th tensor of a tuple: "#<i>"            y keyed by output name: "labels#<name>"
//   y's i-th tensor of a tuple: "labels##<i>"     one y tensor: the element's labels
// Such elements batch, shuffle, shard and split over replicas as any other. fit, evaluate,
// predict and model_to_estimator's input_fn take them; x's map may hold more features than the
// model's inputs. A y key that names no output is an InvalidArgumentError naming the output
// names; an output that has a loss or metrics but no y is one too.
//
//   auto ds = keras::from_tensor_slices(data::Features{{"image", x}},
//                                       keras::Targets{{"digit", y1}, {"parity", y2}})
//                 .shuffle(1000, 1).batch(32);
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "data/dataset.h"

namespace est::keras {

using ops::Tensor;

// x: the inputs by Input name, or in input order.
using XStructure = std::variant<data::Features, std::vector<Tensor>>;
// y keyed by output name.
using Targets = std::map<std::string, Tensor>;
// y: none (predict), one tensor for every output, by output name, or in output order.
using YStructure = std::variant<Tensor, Targets, std::vector<Tensor>>;

// One element (x, y) as described above. InvalidArgumentError for an empty name or a name with
// '#' in x's or y's map.
data::Element pack_x_y(XStructure x, YStructure y = Tensor());
// Dataset::from_tensor_slices of pack_x_y(x, y): every tensor sliced along its first dimension.
data::Dataset from_tensor_slices(XStructure x, YStructure y = Tensor());

}  // namespace est::keras
