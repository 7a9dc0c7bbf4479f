// TlsOptions: where the TLS certificates of a job's connections are (three paths, or none for
// plain TCP), as a plain struct of strings, so that a program that sets them (through
// MultiWorkerOptions) includes no gRPC header; distribute/net/grpc_util.h turns them into gRPC's
// credentials.
#pragma once

#include <string>

namespace est::distribute {

// TLS for the job's gRPC connections: all three paths set, or none (plain TCP). The same
// certificate authority signs every task's certificate.
struct TlsOptions {
  std::string ca_certificate_path;  // PEM: the authority every peer's certificate chains to
  std::string certificate_path;     // PEM: this task's certificate
  std::string private_key_path;     // PEM: its key
  bool enabled() const { return !certificate_path.empty(); }
  // InvalidArgumentError when only some paths are set.
  void validate() const;
  // From EST_TLS_CA, EST_TLS_CERT and EST_TLS_KEY (unset: TLS off).
  static TlsOptions from_environment();
};

}  // namespace est::distribute
