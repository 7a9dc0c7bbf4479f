// The lookup tables of a traced function (feature_column/lookup.h) in the ONNX export: which run
// in the graph, and how, and which run before it as est-serve's pre-processing steps
// (lookup_step.h). The decision is one function (lookup_in_graph) so that to_onnx's liveness,
// its graph inputs and the emitter agree on it; it lives apart from the op emitter
// (onnx_emitter.h) because it is about feature columns, not registry ops.
//
// In the graph, so that any ONNX runtime runs them: a string vocabulary list without OOV
// buckets, as ai.onnx.ml's LabelEncoder (opset 2; "" maps to -1, unknown keys to
// default_value); an identity column with a default, as int64 arithmetic; an index-to-string
// table (a classifier's label_vocabulary), as a Gather from a string initializer.
// Before the graph: the other lookups of a feature (OOV buckets and hash buckets need TF's
// Fingerprint64, which ONNX has not; an identity column without a default fails on an id out of
// range; a vocabulary file is an asset; integer vocabularies). Their ids feed the graph input
// "<column>/ids"; the feature itself stays out of the graph when nothing else reads it. The
// same lookup twice (an indicator and an embedding of one column) feeds one input.
#pragma once

#include <map>
#include <set>
#include <vector>

#include "export/lookup_step.h"
#include "export/onnx_emitter.h"

namespace est::serving {

// Whether `table` is written as ONNX ops in the graph (LabelEncoder or identity arithmetic).
bool lookup_in_graph(const feature_column::LookupTable& table);

// Whether `node` is a lookup that runs before the graph: any but an index-to-string table and
// the ones lookup_in_graph writes.
bool is_feature_lookup(const Trace& trace, const TracedNode& node);

// Writes the lookup `node` that runs in the graph; refuses one over a value model_fn computed.
void emit_lookup(OnnxEmitter& emitter, const TracedNode& node);

struct FeatureLookups {
  std::vector<LookupStep> steps;  // one a distinct (feature, table)
  std::set<int> looked_up;        // the trace inputs (value ids) the steps read
};

// The feature lookups `live_lookups` (node indexes) as pre-processing steps: each reads a trace
// input, through reshapes (`producer`: value id -> the index of the node that made it), and its
// ids become a graph input, added to the emitter's graph. `write_steps`: whether the caller can
// write them (Estimator::export_saved_model does); otherwise a live one is refused.
FeatureLookups feature_lookups(OnnxEmitter& emitter, const std::map<int, size_t>& producer,
                               const std::set<size_t>& live_lookups, bool write_steps);

}  // namespace est::serving
