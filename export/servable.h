// A served model: the versions under a base path (TF Serving's layout: <base>/<version>/, the
// version a number, as export_saved_model writes them), the newest one loaded (TF Serving's
// default version policy, "latest"), and its reload when the newest version on disk changes: a
// newer one appears, or the newest one is deleted (the next newest is loaded; none left: the
// model is unloaded and requests get 404).
//
// Requests take a shared_ptr to the current Servable; poll() swaps in a new one, so a request
// in flight finishes on the version it started with and none is dropped. A version that fails to
// load (half copied, an op est does not run) is logged and retried at the next poll while the
// old version keeps serving.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "export/lookup_step.h"
#include "export/onnx_model.h"
#include "export/parse_example_step.h"

namespace est::serving {

// One signature of signatures.json: method name, inputs and outputs by key (TensorInfo's name
// is the ONNX graph's input or output). With parse_example, the signature's one input is a
// string tensor of serialized tf.Examples, parsed into the graph's inputs before it runs. The
// lookups then turn features into the ids the graph takes (lookup_step.h).
struct SignatureDef {
  std::string method_name;
  std::map<std::string, TensorInfo> inputs;
  std::map<std::string, TensorInfo> outputs;
  std::optional<ParseExampleStep> parse_example;
  std::vector<LookupStep> lookups;
};
using Signatures = std::map<std::string, SignatureDef>;

// Parses signatures.json (DataLossError naming the file and the field when malformed); its
// lookups read their vocabulary assets relative to the file's directory.
Signatures load_signatures(const std::string& path);
// TF's dtype names ("DT_FLOAT") and back (InvalidArgumentError for an unknown name).
std::string tf_dtype_name(DType dtype);
DType dtype_from_tf_name(const std::string& name);

struct Servable {
  int64_t version = 0;
  std::string path;
  OnnxModel model;
  Signatures signatures;
};

// The newest version directory under `base_path` holding a model.onnx, or nullopt.
std::optional<std::pair<int64_t, std::string>> newest_version(const std::string& base_path);

class ModelManager {
 public:
  ModelManager(std::string name, std::string base_path);
  // Loads the newest version on disk when it is not the one served, or unloads the served one
  // when the base path holds no version; true when the version served changed.
  bool poll();
  // The version served now (null before the first one loaded).
  std::shared_ptr<const Servable> current() const;
  const std::string& name() const { return name_; }
  const std::string& base_path() const { return base_path_; }

 private:
  std::string name_;
  std::string base_path_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Servable> current_;
  int64_t failed_version_ = -1;  // logged once
};

}  // namespace est::serving
