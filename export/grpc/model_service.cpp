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

void add_status(tfs::GetModelStatusResponse& response, int64_t version) {
  auto* status = response.add_model_version_status();
  status->set_version(version);
  status->set_state(tfs::ModelVersionStatus::AVAILABLE);
  status->mutable_status()->set_error_code(tensorflow::error::OK);
}

void model_status(const ServerCore& core, const tfs::GetModelStatusRequest& request,
                  tfs::GetModelStatusResponse& response) {
  require_model_spec(request.has_model_spec());
  const tfs::ModelSpec& spec = request.model_spec();
  const std::string name = printable(spec.name());
  if (spec.version_choice_case() != tfs::ModelSpec::VERSION_CHOICE_NOT_SET) {
    std::shared_ptr<const Servable> servable;
    try {
      servable = find_servable(core, spec);
    } catch (const NotFoundError&) {
      throw NotFoundError(fmt::format("Could not find version {} of model {}",
                                      spec.has_version() ? std::to_string(spec.version().value())
                                                         : printable(spec.version_label()),
                                      name));
    }
    add_status(response, servable->version);
    return;
  }
  auto model = core.model(spec.name());
  const auto served = model ? model->served() : std::vector<std::shared_ptr<const Servable>>{};
  if (served.empty()) throw NotFoundError("Could not find any versions of model " + name);
  for (auto it = served.rbegin(); it != served.rend(); ++it) add_status(response, (*it)->version);
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
