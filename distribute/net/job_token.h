// The job token: a shared secret that every RPC and every data-plane connection of a
// multi-worker job carries, so that a process that does not know it cannot join the job, send
// it tensors or stop it. It comes from the environment: EST_JOB_TOKEN (the token itself) or
// EST_JOB_TOKEN_FILE (a file holding it, e.g. a Kubernetes secret); est-launch generates one for
// the tasks it starts. A job of more than one task without a token does not start.
#pragma once

#include <string>

namespace est::distribute {

inline constexpr const char* kJobTokenVariable = "EST_JOB_TOKEN";
inline constexpr const char* kJobTokenFileVariable = "EST_JOB_TOKEN_FILE";
inline constexpr const char* kJobTokenMetadataKey = "est-job-token";

// The token from the environment: InvalidArgumentError when neither variable is set (saying
// how to set one), when both are, when the file cannot be read (naming it), or when the token
// is shorter than 16 characters or holds characters outside printable ASCII.
std::string job_token_from_environment();

// 32 random hexadecimal characters (from /dev/urandom), for launchers.
std::string generate_job_token();

// Compares two tokens in time that does not depend on where they differ.
bool tokens_equal(const std::string& a, const std::string& b);

}  // namespace est::distribute
