// TF2 object-based checkpoints read by their variables' names (checkpoint/tf_object_graph.h):
// TF Serving's half_plus_two_tf2_cpu, which TensorFlow wrote, with every value checked, and a
// bundle built here the way Keras' save_weights lays out a Dense layer trained with Adam (the
// optimizer's slot_variables), read through open_checkpoint, initializer_from_checkpoint and
// warm start.
#include <doctest/doctest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/source.h"
#include "checkpoint/tf_bundle_reader.h"
#include "checkpoint/tf_object_graph.h"
#include "helpers.h"
#include "tf_bundle_helpers.h"
#include "tf_trackable_object_graph.pb.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::checkpoint::tf_test;
using est::testing::TempDir;
using Names = std::map<std::string, std::string, std::less<>>;

namespace {

using Graph = tfproto::TrackableObjectGraph;

void add_child(Graph::TrackableObject* node, int id, const std::string& name) {
  auto* child = node->add_children();
  child->set_node_id(id);
  child->set_local_name(name);
}

void add_value(Graph::TrackableObject* node, const std::string& full_name, const std::string& key) {
  auto* attribute = node->add_attributes();
  attribute->set_name("VARIABLE_VALUE");
  attribute->set_full_name(full_name);
  attribute->set_checkpoint_key(key);
}

std::string key(const std::string& path) { return path + "/.ATTRIBUTES/VARIABLE_VALUE"; }
std::string slot_key(const std::string& variable, const std::string& slot) {
  return key(variable + "/.OPTIMIZER_SLOT/optimizer/" + slot);
}

// Keras' save_weights of Sequential([Dense(2)]) after Adam steps: node 0 the model, 1 the
// layer, 2 and 3 its kernel and bias, 4 the optimizer (iter, and the slots m and v of both
// variables in nodes 5 to 8), as TrackableObjectGraph lists them.
Graph keras_dense_adam_graph() {
  Graph graph;
  for (int i = 0; i < 10; ++i) graph.add_nodes();
  add_child(graph.mutable_nodes(0), 1, "layer_with_weights-0");
  add_child(graph.mutable_nodes(0), 4, "optimizer");
  add_child(graph.mutable_nodes(1), 2, "kernel");
  add_child(graph.mutable_nodes(1), 3, "bias");
  add_value(graph.mutable_nodes(2), "dense/kernel", key("layer_with_weights-0/kernel"));
  add_value(graph.mutable_nodes(3), "dense/bias", key("layer_with_weights-0/bias"));
  add_child(graph.mutable_nodes(4), 9, "iter");
  add_value(graph.mutable_nodes(9), "Adam/iter", key("optimizer/iter"));
  int slot_node = 5;
  for (int variable : {2, 3}) {
    const std::string path =
        variable == 2 ? "layer_with_weights-0/kernel" : "layer_with_weights-0/bias";
    const std::string full = variable == 2 ? "dense/kernel" : "dense/bias";
    for (const char* slot : {"m", "v"}) {
      auto* reference = graph.mutable_nodes(4)->add_slot_variables();
      reference->set_original_variable_node_id(variable);
      reference->set_slot_name(slot);
      reference->set_slot_variable_node_id(slot_node);
      add_value(graph.mutable_nodes(slot_node++), "Adam/" + full + "/" + slot,
                slot_key(path, slot));
    }
  }
  return graph;
}

// The bundle of that graph: kernel [1, 2], bias [2], their m and v, iter.
void write_keras_bundle(const std::string& prefix, const Graph& graph) {
  BundleBuilder tf;
  tf.add_strings(std::string(kTfObjectGraphKey), {}, {graph.SerializeAsString()});
  tf.add_f32(key("layer_with_weights-0/kernel"), {1, 2}, {1.5f, -2.25f});
  tf.add_f32(key("layer_with_weights-0/bias"), {2}, {0.125f, 4});
  tf.add_f32(slot_key("layer_with_weights-0/kernel", "m"), {1, 2}, {0.1f, 0.2f});
  tf.add_f32(slot_key("layer_with_weights-0/kernel", "v"), {1, 2}, {0.3f, 0.4f});
  tf.add_f32(slot_key("layer_with_weights-0/bias", "m"), {2}, {0.5f, 0.6f});
  tf.add_f32(slot_key("layer_with_weights-0/bias", "v"), {2}, {0.7f, 0.8f});
  tf.add_f32(key("optimizer/iter"), {}, {7});
  tf.write(prefix);
}

std::vector<float> values(const CheckpointSource& source, const std::string& name) {
  return source.read(name).to_vector<float>();
}

}  // namespace

TEST_CASE("TF Serving's half_plus_two_tf2_cpu read by its variables' names a, b and c") {
  const std::string saved_model = fixture("half_plus_two_tf2_cpu");
  TfBundleReader reader(saved_model);
  CHECK(tf_object_graph_names(reader) == Names{{"a", key("a")}, {"b", key("b")}, {"c", key("c")}});
  std::unique_ptr<CheckpointSource> source = open_checkpoint(saved_model);
  CHECK(source->names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(values(*source, "a") == std::vector<float>{0.5f});
  CHECK(values(*source, "b") == std::vector<float>{2.0f});
  CHECK(values(*source, "c") == std::vector<float>{3.0f});
  // The keys themselves are still read, as tf.train.load_variable reads them.
  CHECK(source->contains(key("a")));
  CHECK(values(*source, key("c")) == std::vector<float>{3.0f});
  CHECK_FALSE(source->contains("d"));

  ops::Generator generator(0);
  Tensor b = initializer_from_checkpoint(saved_model, "b")({}, DType::kF32, generator);
  CHECK(b.data<float>()[0] == 2.0f);
  TempDir model_dir;
  TensorBundle model;
  model.add_variable("a", Tensor::zeros({}));
  model.add_variable("c", Tensor::zeros({}));
  REQUIRE(warm_start(model_dir.str(), {.ckpt_to_initialize_from = saved_model}, model));
  CHECK(model.find("a")->value.data<float>()[0] == 0.5f);
  CHECK(model.find("c")->value.data<float>()[0] == 3.0f);
}

TEST_CASE("a Keras-style checkpoint with Adam's slots: dense/kernel/Adam and Adam_1") {
  TempDir dir;
  const std::string prefix = dir.str() + "/ckpt-1";
  write_keras_bundle(prefix, keras_dense_adam_graph());
  std::unique_ptr<CheckpointSource> source = open_checkpoint(prefix);
  CHECK(source->names() == std::vector<std::string>{"Adam/dense/bias/m", "Adam/dense/bias/v",
                                                    "Adam/dense/kernel/m", "Adam/dense/kernel/v",
                                                    "Adam/iter", "dense/bias", "dense/bias/Adam",
                                                    "dense/bias/Adam_1", "dense/kernel",
                                                    "dense/kernel/Adam", "dense/kernel/Adam_1"});
  CHECK(values(*source, "dense/kernel") == std::vector<float>{1.5f, -2.25f});
  CHECK(values(*source, "dense/bias") == std::vector<float>{0.125f, 4});
  CHECK(values(*source, "dense/kernel/Adam") == std::vector<float>{0.1f, 0.2f});
  CHECK(values(*source, "dense/kernel/Adam_1") == std::vector<float>{0.3f, 0.4f});
  CHECK(values(*source, "dense/bias/Adam") == std::vector<float>{0.5f, 0.6f});
  CHECK(values(*source, "dense/bias/Adam_1") == std::vector<float>{0.7f, 0.8f});
  CHECK(values(*source, "Adam/dense/bias/v") == std::vector<float>{0.7f, 0.8f});
  CHECK(values(*source, "Adam/iter") == std::vector<float>{7});

  // Warm start with the slots staged, as a TF1 warm start of `dense/` stages them.
  TensorBundle model;
  model.add_variable("dense/kernel", Tensor::zeros({1, 2}));
  model.add_variable("dense/bias", Tensor::zeros({2}));
  auto result =
      warm_start(dir.str() + "/new",
                 {.ckpt_to_initialize_from = prefix, .vars_to_warm_start = {"dense/"}}, model);
  REQUIRE(result);
  CHECK(model.find("dense/bias")->value.to_vector<float>() == std::vector<float>{0.125f, 4});
  std::map<std::string, std::vector<float>> staged;
  for (const auto& [name, value] : result->staged) staged[name] = value.to_vector<float>();
  CHECK(staged == std::map<std::string, std::vector<float>>{{"dense/bias/Adam", {0.5f, 0.6f}},
                                                            {"dense/bias/Adam_1", {0.7f, 0.8f}},
                                                            {"dense/kernel/Adam", {0.1f, 0.2f}},
                                                            {"dense/kernel/Adam_1", {0.3f, 0.4f}}});
}

TEST_CASE("slot names of TF1's and Keras' optimizers map to est's") {
  using Siblings = std::map<std::string, int>;
  CHECK(tf1_slot_name("accumulator", {{"accumulator", 1}}) == "Adagrad");
  CHECK(tf1_slot_name("accum", {{"accum", 1}, {"linear", 1}}) == "Ftrl");
  CHECK(tf1_slot_name("accumulator", {{"accumulator", 1}, {"linear", 1}}) == "Ftrl");
  CHECK(tf1_slot_name("linear", {{"accum", 1}, {"linear", 1}}) == "Ftrl_1");
  CHECK(tf1_slot_name("momentum", {{"momentum", 1}}) == "Momentum");
  CHECK(tf1_slot_name("rms", {{"momentum", 1}, {"rms", 1}}) == "RMSProp");
  CHECK(tf1_slot_name("momentum", {{"momentum", 1}, {"rms", 1}}) == "RMSProp_1");
  CHECK(tf1_slot_name("mg", Siblings{{"mg", 1}, {"momentum", 1}, {"rms", 1}}) == "RMSProp_1");
  CHECK(tf1_slot_name("momentum", Siblings{{"mg", 1}, {"momentum", 1}, {"rms", 1}}) == "RMSProp_2");
  CHECK(tf1_slot_name("vhat", {{"m", 1}, {"v", 1}, {"vhat", 1}}) == "vhat");
}

TEST_CASE("a damaged object graph is DataLossError naming the checkpoint") {
  CHECK_THROWS_WITH_AS(tf_object_graph_names(std::string("\x0a\xff\xff", 3), "ckpt-9"),
                       doctest::Contains("ckpt-9: its _CHECKPOINTABLE_OBJECT_GRAPH entry (3 bytes) "
                                         "is not a TrackableObjectGraph"),
                       DataLossError);
  Graph graph = keras_dense_adam_graph();
  graph.mutable_nodes(4)->mutable_slot_variables(1)->set_slot_variable_node_id(42);
  CHECK_THROWS_WITH_AS(tf_object_graph_names(graph.SerializeAsString(), "ckpt-9"),
                       doctest::Contains("the object graph's slot's value names node 42 of 10"),
                       DataLossError);
  TempDir dir;
  write_keras_bundle(dir.str() + "/ckpt-1", graph);
  CHECK_THROWS_AS(open_checkpoint(dir.str() + "/ckpt-1"), DataLossError);
}
