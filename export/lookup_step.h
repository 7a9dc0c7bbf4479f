// The lookup steps of a signature, as signatures.json holds them: the categorical columns'
// lookups that run before the ONNX graph, in est-serve (feature_column/lookup.h; which ones:
// export/onnx_lookup.h): hash buckets and OOV buckets need TF's Fingerprint64, which has no
// ONNX op, an identity column without default_value must fail on an id out of range, and a
// vocabulary file is an asset. Each step reads a feature (a signature input, or a feature the
// parse_example step made) and feeds the graph input "<column>/ids" with int64 ids of the
// feature's shape (-1 where TF ignores the value: "" or -1):
//
//   "lookups": [{"input": "color", "output": "color/ids", "kind": "vocabulary",
//                "key_dtype": "DT_STRING", "vocabulary_file": "assets/colors.txt",
//                "vocabulary_size": 3, "num_oov_buckets": 1, "default_value": -1},
//               {"input": "city", "output": "city/ids", "kind": "hash_bucket",
//                "key_dtype": "DT_STRING", "num_buckets": 100},
//               {"input": "day", "output": "day/ids", "kind": "identity",
//                "key_dtype": "DT_INT64", "num_buckets": 7}]
//
// A vocabulary read from a file is an asset: the file is copied into the export's assets/ and
// named relative to the export directory, so a moved export still serves; a vocabulary list is
// written inline ("vocabulary": [...]). A client that runs model.onnx without est-serve does
// these lookups itself, by the same rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/onnx_model.h"
#include "feature_column/lookup.h"

namespace est::serving {

struct LookupStep {
  std::string input;                  // the feature the lookup reads
  std::string output;                 // the graph input its ids feed
  feature_column::LookupTable table;  // a vocabulary_file is relative to the export directory
  std::shared_ptr<const feature_column::Lookup> lookup;  // the table's index, built at load
};

nlohmann::json to_json(const LookupStep& step);
// `export_dir` is where a vocabulary_file is read from. DataLossError naming the field when
// malformed; NotFoundError for a missing asset.
LookupStep lookup_step_from_json(const nlohmann::json& json, const std::string& export_dir);

// The steps run on `features` (by name), their ids shaped as the graph inputs they feed
// (`graph_inputs`); InvalidArgumentError (the client's error) for a missing feature, a value of
// the wrong kind or an identity id out of range.
NamedTensors run_lookups(const std::vector<LookupStep>& steps, NamedTensors features,
                         const std::vector<TensorInfo>& graph_inputs);

}  // namespace est::serving
