// Credentials, token metadata and status conversions for the job's gRPC services.
#include "distribute/net/grpc_util.h"

#include <fmt/format.h>

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "coordination.pb.h"
#include "distribute/net/job_token.h"
#include "ops/error.h"
#include "ops/logging.h"

namespace est::distribute {
namespace {

std::string read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgumentError(fmt::format("cannot read the TLS {} {}", what, path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsOptions& tls) {
  tls.validate();
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = read_pem(tls.ca_certificate_path, "CA certificate");
  options.pem_key_cert_pairs.push_back({read_pem(tls.private_key_path, "private key"),
                                        read_pem(tls.certificate_path, "certificate")});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& address, const TlsOptions& tls) {
  tls.validate();
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxRpcMessageBytes);
  arguments.SetMaxSendMessageSize(kMaxRpcMessageBytes);
  // Reconnect quickly after a refused connection: the leader may start a moment later.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls.enabled()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = read_pem(tls.ca_certificate_path, "CA certificate");
    options.pem_private_key = read_pem(tls.private_key_path, "private key");
    options.pem_cert_chain = read_pem(tls.certificate_path, "certificate");
    credentials = grpc::SslCredentials(options);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

grpc::Status check_token(grpc::ServerContext& context, const std::string& token) {
  const auto& metadata = context.client_metadata();
  auto found = metadata.find(kJobTokenMetadataKey);
  if (found != metadata.end() &&
      tokens_equal(std::string(found->second.data(), found->second.size()), token))
    return grpc::Status::OK;
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::string peer = context.peer();
  {
    std::lock_guard lock(mutex);
    if (logged.insert(peer).second)
      log::warning(
          "Refused a call from {} without this job's token (further refusals of this "
          "peer are not logged)",
          peer);
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this job's token is missing or wrong; set EST_JOB_TOKEN (or "
                      "EST_JOB_TOKEN_FILE) to the job's token");
}

void prepare_context(grpc::ClientContext& context, const std::string& token,
                     std::chrono::steady_clock::time_point deadline) {
  context.AddMetadata(kJobTokenMetadataKey, token);
  auto remaining = deadline - std::chrono::steady_clock::now();
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining));
}

void to_proto(const JobStatus& status, rpc::Status& proto) {
  proto.set_code(static_cast<int32_t>(status.code));
  proto.set_message(status.message);
  proto.set_origin(status.origin);
}

JobStatus from_proto(const rpc::Status& proto) {
  return {static_cast<StatusCode>(proto.code()), proto.message(), proto.origin()};
}

void throw_if_error(const JobStatus& status) {
  if (status.ok()) return;
  throw_error(status.code, status.message);
}

}  // namespace est::distribute
