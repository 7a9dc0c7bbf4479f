// What every gRPC server and client of a job shares: credentials (plain, or TLS from
// certificate paths), the job token in each call's metadata and its check on the server
// (refused calls are logged once per peer), bounded message sizes, and the conversion between
// gRPC statuses, the protocol's Status message and est's exceptions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "distribute/net/coordination_state.h"
#include "distribute/net/tls_options.h"

namespace est::distribute {

namespace rpc {
class Status;
}

// Messages of the job's RPCs stay under this size (tensors travel on the data plane).
inline constexpr int kMaxRpcMessageBytes = 4 << 20;

std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsOptions& tls);
std::shared_ptr<grpc::Channel> make_channel(const std::string& address, const TlsOptions& tls);

// The token check of a server: UNAUTHENTICATED (logged once per peer) when the call's
// metadata lacks `token`.
grpc::Status check_token(grpc::ServerContext& context, const std::string& token);

// A client context with the token and a deadline.
void prepare_context(grpc::ClientContext& context, const std::string& token,
                     std::chrono::steady_clock::time_point deadline);

void to_proto(const JobStatus& status, rpc::Status& proto);
JobStatus from_proto(const rpc::Status& proto);
// Throws the est exception of a failed status (its message already names the task).
void throw_if_error(const JobStatus& status);

}  // namespace est::distribute
