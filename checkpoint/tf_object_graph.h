// TensorFlow 2's object-based checkpoints (tf.train.Checkpoint, Keras' save_weights): their
// keys name a path through the object graph (`layer_with_weights-0/kernel/.ATTRIBUTES/
// VARIABLE_VALUE`), and the `_CHECKPOINTABLE_OBJECT_GRAPH` string tensor (a serialized
// TrackableObjectGraph) says which variable each key holds. This maps the variables' names to
// the keys, so that a checkpoint TF2 wrote is read by the names a TF1 Saver (and est) use:
//
//  - every attribute's full_name (`dense/kernel`) names its checkpoint_key, as TensorFlow's
//    object_graph_key_mapping (python/checkpoint/checkpoint.py) maps them for name-based
//    loading (saver_from_object_based_checkpoint, init_from_checkpoint);
//  - every slot an optimizer object lists (slot_variables: the original variable, the slot's
//    name, the node holding it) is also named `<variable's full_name>/<slot>` with TF1's slot
//    names as est's optimizers use them (nn/optimizers.h): Adam's m and v are `Adam` and
//    `Adam_1`, Adagrad's accumulator `Adagrad`, Ftrl's accumulator (TF1: accum) and linear
//    `Ftrl` and `Ftrl_1`, RMSProp's rms, mg and momentum `RMSProp`, `RMSProp_1`(, `_2`),
//    Momentum's momentum `Momentum`; an unknown slot keeps its own name. Which optimizer owns
//    the slot is read from the slot names the same object lists (m and v: Adam; linear: Ftrl;
//    rms: RMSProp).
//
// A name already used (a key of the bundle, or an earlier mapping) is not mapped again.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace est::checkpoint {

class TfBundleReader;

// The key of the serialized TrackableObjectGraph (trackable/base.py OBJECT_GRAPH_PROTO_KEY).
inline constexpr std::string_view kTfObjectGraphKey = "_CHECKPOINTABLE_OBJECT_GRAPH";

// Variable name -> checkpoint key, from the serialized graph. DataLossError naming `where` when
// the bytes are not a TrackableObjectGraph or a node id is out of range.
std::map<std::string, std::string, std::less<>> tf_object_graph_names(std::string_view serialized,
                                                                      const std::string& where);

// The same for a bundle: empty when it has no object graph (a TF1 checkpoint); names that are
// keys of the bundle themselves are left out.
std::map<std::string, std::string, std::less<>> tf_object_graph_names(const TfBundleReader& reader);

// One node of a TrackableObjectGraph to write: its children (node id, local name), its saved
// tensors (TF2 variables: name "VARIABLE_VALUE", the variable's full_name, its checkpoint key)
// and, for an optimizer, its slots (the variable's node, the slot's name, the slot's node).
struct TfObjectNode {
  struct Attribute {
    std::string name = "VARIABLE_VALUE";
    std::string full_name;
    std::string checkpoint_key;
  };
  struct Slot {
    int original_variable_node_id = 0;
    std::string slot_name;
    int slot_variable_node_id = 0;
  };
  std::vector<std::pair<int, std::string>> children;
  std::vector<Attribute> attributes;
  std::vector<Slot> slot_variables;
};

// The serialized TrackableObjectGraph of `nodes` (node 0 is the root), the bytes of the
// `_CHECKPOINTABLE_OBJECT_GRAPH` string tensor.
std::string serialize_tf_object_graph(const std::vector<TfObjectNode>& nodes);

// est's (TF1's) name of an optimizer slot: `slot_name` of an optimizer object that lists
// `sibling_slots` (all its slot names, `slot_name` among them).
std::string tf1_slot_name(std::string_view slot_name,
                          const std::map<std::string, int>& sibling_slots);

}  // namespace est::checkpoint
