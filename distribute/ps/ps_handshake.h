// The opening of a worker's connection to a `ps` task: the job token (a connection without it
// is refused and logged once per address, as the data plane does), who is calling, and what
// the connection carries: requests, or the heartbeat (distribute/ps/ps_heartbeat.h) that tells
// the worker a ps task has stopped answering. A requests connection between two processes of one
// machine then carries its frames through two shared-memory channels (one each way,
// distribute/net/shm_channel.h: one copy in and one out per frame instead of loopback TCP's
// kernel copies and stack), the TCP connection only telling whether the peer is still there;
// EST_DATA_PLANE=tcp keeps them on TCP.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "distribute/net/data_plane.h"

namespace est::distribute {

enum class PsConnection { kRequests, kHeartbeat };

// Connects to the ps task at `address` (described as `ps_name` in messages), retrying until
// `timeout` (the ps may start after the worker, its host name may not resolve yet: pods come up
// in any order), then introduces `client_name` with `token`. UnavailableError naming the task
// when it cannot connect in time or refuses the token.
Link connect_to_ps(const std::string& address, const std::string& ps_name, const std::string& token,
                   const std::string& client_name, std::chrono::milliseconds timeout,
                   const HealthCheck& health, PsConnection kind = PsConnection::kRequests);

struct PsPeer {
  std::string name;  // "worker 1"
  PsConnection kind = PsConnection::kRequests;
};

// Takes a connection accepted on a ps task's socket: the caller when it carries the token,
// nullopt (logged once per address) when it does not or says nothing within 2 s.
std::optional<PsPeer> accept_ps_client(Link& link, const std::string& token,
                                       const std::string& peer_address);

}  // namespace est::distribute
