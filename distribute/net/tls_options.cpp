// TlsOptions' checks and its reading of EST_TLS_CA, EST_TLS_CERT and EST_TLS_KEY.
#include "distribute/net/tls_options.h"

#include <cstdlib>

#include "ops/error.h"

namespace est::distribute {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

void TlsOptions::validate() const {
  int set = !ca_certificate_path.empty() + !certificate_path.empty() + !private_key_path.empty();
  if (set != 0 && set != 3)
    throw InvalidArgumentError(
        "TLS needs three paths (the CA certificate, this task's certificate and its private "
        "key: EST_TLS_CA, EST_TLS_CERT, EST_TLS_KEY), but only some are set");
}

TlsOptions TlsOptions::from_environment() {
  TlsOptions tls{.ca_certificate_path = environment("EST_TLS_CA"),
                 .certificate_path = environment("EST_TLS_CERT"),
                 .private_key_path = environment("EST_TLS_KEY")};
  tls.validate();
  return tls;
}

}  // namespace est::distribute
