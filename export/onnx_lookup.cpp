// The lookup tables in the ONNX export (see onnx_lookup.h): the in-graph forms (identity
// arithmetic, LabelEncoder, the index-to-string Gather) and the feature lookups that become
// pre-processing steps feeding graph inputs.
#include "export/onnx_lookup.h"

#include <algorithm>

#include <fmt/format.h>

#include "export/onnx_export.h"

namespace est::serving {
namespace {

using feature_column::LookupTable;
using Kind = LookupTable::Kind;

// An identity column's ids with a default, in int64 arithmetic (ONNX 13 has no Where on ints
// that est runs): ignored = x == -1, in = (x > -1) * (x < num_buckets),
// v = in * x + (1 - in) * default, ids = v * (1 - ignored) - ignored.
void identity_lookup(OnnxEmitter& e, const TracedNode& node, const LookupTable& table) {
  std::string x = e.value_name(node.inputs.at(0));
  if (e.dtype(node.inputs.at(0)) != DType::kI64) {
    std::string cast = e.temporary();
    e.attribute(e.add("Cast", {x}, {cast}), "to", onnx_dtype(DType::kI64));
    x = cast;
  }
  auto as_int = [&](const std::string& op, const std::string& a, double b) {
    std::string compared = e.temporary(), out = e.temporary();
    e.add(op, {a, e.scalar_constant(b, DType::kI64)}, {compared});
    e.attribute(e.add("Cast", {compared}, {out}), "to", onnx_dtype(DType::kI64));
    return out;
  };
  const std::string one = e.scalar_constant(1, DType::kI64);
  std::string ignored = as_int("Equal", x, -1), in_range = e.temporary();
  e.add("Mul",
        {as_int("Greater", x, -1), as_int("Less", x, static_cast<double>(table.num_buckets))},
        {in_range});
  std::string kept = e.temporary(), outside = e.temporary(), defaults = e.temporary();
  std::string value = e.temporary(), not_ignored = e.temporary(), masked = e.temporary();
  e.add("Mul", {in_range, x}, {kept});
  e.add("Sub", {one, in_range}, {outside});
  e.add("Mul", {outside, e.scalar_constant(static_cast<double>(table.default_value), DType::kI64)},
        {defaults});
  e.add("Add", {kept, defaults}, {value});
  e.add("Sub", {one, ignored}, {not_ignored});
  e.add("Mul", {value, not_ignored}, {masked});
  e.add("Sub", {masked, ignored}, {e.value_name(node.outputs.at(0))});
}

// ai.onnx.ml's LabelEncoder: each key's position, "" (TF's ignored value) -1, others
// default_value.
void label_encoder(OnnxEmitter& e, const TracedNode& node, const LookupTable& table) {
  std::vector<std::string> keys = table.string_keys;
  std::vector<int64_t> values;
  for (size_t i = 0; i < keys.size(); ++i)
    values.push_back(keys[i].empty() ? -1 : static_cast<int64_t>(i));
  if (std::find(keys.begin(), keys.end(), std::string()) == keys.end()) {
    keys.emplace_back();
    values.push_back(-1);
  }
  auto* encoder =
      e.add("LabelEncoder", {e.value_name(node.inputs.at(0))}, {e.value_name(node.outputs.at(0))});
  encoder->set_domain(kOnnxMlDomain);
  e.attribute(encoder, "keys_strings", keys);
  e.attribute(encoder, "values_int64s", values);
  e.attribute(encoder, "default_int64", table.default_value);
  e.use_ml_domain();
}

const LookupTable& table_of(const Trace& trace, const TracedNode& node) {
  return trace.lookups.at(static_cast<size_t>(node.member)).table;
}

}  // namespace

// A string vocabulary list without OOV buckets is ai.onnx.ml's LabelEncoder in the graph, an
// identity column with a default is arithmetic on the ids; the other lookups need TF's
// Fingerprint64 or an error on bad ids, which ONNX has not, and a vocabulary file is an asset
// the step reads.
bool lookup_in_graph(const LookupTable& table) {
  return (table.kind == Kind::kVocabulary && table.key_dtype == DType::kString &&
          table.num_oov_buckets == 0 && table.vocabulary_file.empty()) ||
         (table.kind == Kind::kIdentity && table.has_default);
}

bool is_feature_lookup(const Trace& trace, const TracedNode& node) {
  if (node.kind != NodeKind::kLookup) return false;
  const LookupTable& table = table_of(trace, node);
  return table.kind != Kind::kIndexToString && !lookup_in_graph(table);
}

void emit_lookup(OnnxEmitter& emitter, const TracedNode& node) {
  const LookupTable& table = table_of(emitter.trace(), node);
  if (lookup_in_graph(table) && table.kind == Kind::kIdentity)
    return identity_lookup(emitter, node, table);
  if (lookup_in_graph(table)) return label_encoder(emitter, node, table);
  // A feature lookup here reads what model_fn computed: to_onnx made the others graph inputs.
  if (table.kind != Kind::kIndexToString)
    refuse(node, "a lookup over a value model_fn computed (lookups read features)");
  const std::string strings = emitter.unique_name("strings");
  emitter.add_initializer(
      strings, Tensor::from_vector<std::string>(table.string_keys, {table.vocabulary_size()}));
  emitter.attribute(emitter.add("Gather", {strings, emitter.value_name(node.inputs.at(0))},
                                {emitter.value_name(node.outputs.at(0))}),
                    "axis", int64_t{0});
}

FeatureLookups feature_lookups(OnnxEmitter& emitter, const std::map<int, size_t>& producer,
                               const std::set<size_t>& live_lookups, bool write_steps) {
  const Trace& trace = emitter.trace();
  std::map<int, std::string> input_of;  // value id -> graph input name
  for (const auto& [name, id] : trace.inputs) input_of[id] = name;
  FeatureLookups found;
  std::vector<LookupStep>& steps = found.steps;
  for (size_t i : live_lookups) {
    const TracedNode& node = trace.nodes[i];
    if (!write_steps)
      refuse(node,
             "its lookup runs as est-serve's pre-processing step, which only "
             "Estimator::export_saved_model writes (signatures.json)");
    int root = node.inputs.at(0);
    while (producer.count(root) && trace.nodes[producer.at(root)].kind == NodeKind::kReshape)
      root = trace.nodes[producer.at(root)].inputs.at(0);
    if (!input_of.count(root)) refuse(node, "it reads a value model_fn computed, not a feature");
    found.looked_up.insert(root);
    const LookupTable& table = table_of(trace, node);
    const std::string& feature = input_of.at(root);
    std::string name;
    for (const LookupStep& step : steps)
      if (step.input == feature && step.table == table) name = step.output;
    if (name.empty()) {
      name = node.name + "/ids";
      for (int n = 1;; ++n) {  // a name no other step or input has
        bool taken = trace.inputs.count(name) > 0;
        for (const LookupStep& step : steps) taken = taken || step.output == name;
        if (!taken) break;
        name = fmt::format("{}/ids_{}", node.name, n);
      }
      steps.push_back({.input = feature, .output = name, .table = table});
      emitter.add_graph_input(name, node.outputs.at(0));
    }
    emitter.set_input_name(node.outputs.at(0), name);
  }
  return found;
}

}  // namespace est::serving
