// TF Serving's ModelService (see grpc_server.h). Followed: TF Serving's
// model_servers/get_model_status_impl.cc (the versions served, their messages when none) and
// model_service_impl.cc (a reload answers its status both in the response and as the call's).
#include <fmt/format.h>

#include "export/grpc/model_config.h"
#include "export/grpc/service_util.h"
#include "export/grpc/services.h"
#include "export/rest_json_text.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"

namespace est::serving {
namespace {

namespace tfs = tensorflow::serving;

// A version's state: AVAILABLE, or END with the error of its failed load.
void add_status(tfs::GetModelStatusResponse& response, const VersionStatus& version) {
  auto* status = response.add_model_version_status();
  status->set_version(version.version);
  status->set_state(version.error ? tfs::ModelVersionStatus::END
                                  : tfs::ModelVersionStatus::AVAILABLE);
  status->mutable_status()->set_error_code(
      version.error ? static_cast<tensorflow::error::Code>(*version.error) : tensorflow::error::OK);
  status->mutable_status()->set_error_message(version.error_message);
}

void model_status(const ServerCore& core, const tfs::GetModelStatusRequest& request,
                  tfs::GetModelStatusResponse& response) {
  require_model_spec(request.has_model_spec());
  const tfs::ModelSpec& spec = request.model_spec();
  const std::string name = printable(spec.name());
  std::optional<int64_t> version;
  std::optional<std::string> label;
  if (spec.version_choice_case() == tfs::ModelSpec::kVersion) version = spec.version().value();
  if (spec.version_choice_case() == tfs::ModelSpec::kVersionLabel) label = spec.version_label();
  std::vector<VersionStatus> statuses;
  try {
    statuses = version_statuses(core.model(spec.name()).get(), spec.name(), version, label);
  } catch (const NotFoundError&) {
    if (!version && !label) throw NotFoundError("Could not find any versions of model " + name);
    throw NotFoundError(fmt::format("Could not find version {} of model {}",
                                    version ? std::to_string(*version) : printable(*label), name));
  }
  for (const VersionStatus& status : statuses) add_status(response, status);
}

class ModelService final : public tfs::ModelService::Service {
 public:
  explicit ModelService(ServerCore& core) : core_(core) {}

  grpc::Status GetModelStatus(grpc::ServerContext*, const tfs::GetModelStatusRequest* request,
                              tfs::GetModelStatusResponse* response) override {
    return guarded([&] { model_status(core_, *request, *response); });
  }
  // The models of the request replace the served ones; the call returns once the new models'
  // versions on disk are loaded.
  grpc::Status HandleReloadConfigRequest(grpc::ServerContext*,
                                         const tfs::ReloadConfigRequest* request,
                                         tfs::ReloadConfigResponse* response) override {
    grpc::Status status = guarded([&] {
      core_.reconfigure(models_of(request->config()));
      core_.poll();
    });
    response->mutable_status()->set_error_code(
        static_cast<tensorflow::error::Code>(status.error_code()));
    response->mutable_status()->set_error_message(status.error_message());
    return status;
  }

 private:
  ServerCore& core_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_model_service(ServerCore& core) {
  return std::make_unique<ModelService>(core);
}

}  // namespace est::serving
