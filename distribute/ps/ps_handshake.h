// The opening of a worker's connection to a `ps` task: the job token (a connection without it
// is refused and logged once per address, as the data plane does) and who is calling.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "distribute/data_plane.h"

namespace est::distribute {

// Connects to the ps task at `address` (described as `ps_name` in messages), retrying until
// `timeout` (the ps may start after the worker), then introduces `client_name` with `token`.
// UnavailableError naming the task when it cannot connect in time or refuses the token.
Link connect_to_ps(const std::string& address, const std::string& ps_name, const std::string& token,
                   const std::string& client_name, std::chrono::milliseconds timeout,
                   const HealthCheck& health);

// Takes a connection accepted on a ps task's socket: the caller's name when it carries the
// token, nullopt (logged once per address) when it does not or says nothing within 2 s.
std::optional<std::string> accept_ps_client(Link& link, const std::string& token,
                                            const std::string& peer_address);

}  // namespace est::distribute
