// A served model: the versions under a base path (TF Serving's layout: <base>/<version>/, the
// version a number, as export_saved_model writes them), those its version policy names loaded
// (TF Serving's model_version_policy: the newest N, the default being the newest one; all; or
// specific versions), and its reload when the versions on disk change: a newer one appears, or
// one is deleted (with "latest", the next newest is loaded; none left: the model is unloaded and
// requests get 404).
//
// Requests take a shared_ptr to the current Servable; poll() swaps in a new one, so a request
// in flight finishes on the version it started with and none is dropped. Versions change as TF
// Serving's default policy changes them (core/availability_preserving_policy.cc): a new version
// is loaded and warmed up before the old one is unloaded, so one is always served. A version
// that fails to load (half copied, an op est does not run) is logged and retried at the next
// poll while the old version keeps serving; until a retry succeeds the model's status reports
// it as TF Serving's ServableStateMonitor does (state END, the load's error code and message;
// core/servable_state_monitor.cc, model_servers/get_model_status_impl.cc). Each load is counted
// in serving_metrics.h's load_attempt_count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "export/lookup_step.h"
#include "export/onnx_model.h"
#include "export/parse_example_step.h"
#include "ops/error.h"

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
  std::string model_name;  // the ModelManager's name
};

// Run on a version once it loaded, before it is served (est-serve's model warmup); an Error it
// throws fails the load of that version (logged, retried at the next poll).
using LoadHook = std::function<void(const Servable&)>;

// The newest version directory under `base_path` holding a model.onnx, or nullopt.
std::optional<std::pair<int64_t, std::string>> newest_version(const std::string& base_path);
// Every version directory under `base_path` holding a model.onnx, by version.
std::map<int64_t, std::string> versions_on_disk(const std::string& base_path);

// A version's state as TF Serving's GetModelStatus reports it (ModelVersionStatus): AVAILABLE
// when served, END with the error of its last load when that failed.
struct VersionStatus {
  int64_t version = 0;
  std::optional<StatusCode> error;  // none: AVAILABLE
  std::string error_message;
};

// TF Serving's ServableVersionPolicy (file_system_storage_path_source.proto).
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int64_t num_versions = 1;       // kLatest
  std::vector<int64_t> versions;  // kSpecific
};

class ModelManager {
 public:
  ModelManager(std::string name, std::string base_path, VersionPolicy policy = {},
               std::map<std::string, int64_t> labels = {}, LoadHook on_load = {});
  // Loads the versions on disk the policy names that are not loaded, and unloads the loaded ones
  // it no longer names (all of them when the base path holds no version), in TF Serving's order:
  // the last version served goes only once a version the policy names is served; true when the
  // set of versions served changed.
  bool poll();
  // The newest version served now (null before the first one loaded).
  std::shared_ptr<const Servable> current() const;
  // Version `version` when it is served (null otherwise).
  std::shared_ptr<const Servable> version(int64_t version) const;
  // Every version served, oldest first.
  std::vector<std::shared_ptr<const Servable>> served() const;
  // The state of every version served or whose last load failed, newest first (TF's order).
  std::vector<VersionStatus> statuses() const;
  // The version `label` names (TF Serving's version_labels), or nullopt.
  std::optional<int64_t> label(const std::string& label) const;
  // A new policy and labels (the next poll() applies the policy).
  void reconfigure(VersionPolicy policy, std::map<std::string, int64_t> labels);
  const std::string& name() const { return name_; }
  const std::string& base_path() const { return base_path_; }

 private:
  // One action of poll(): unload a served version; load one (true when it is then served).
  void unload(int64_t number, bool none_on_disk);
  bool load(int64_t number, const std::string& path);

  std::string name_;
  std::string base_path_;
  std::mutex poll_mutex_;  // one poll() at a time (the file-system and config pollers)
  mutable std::mutex mutex_;
  VersionPolicy policy_;
  std::map<std::string, int64_t> labels_;
  std::map<int64_t, std::shared_ptr<const Servable>> served_;
  std::map<int64_t, VersionStatus> failed_;  // versions whose last load failed (logged once)
  LoadHook on_load_;
};

}  // namespace est::serving
