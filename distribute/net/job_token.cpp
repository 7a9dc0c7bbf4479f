// The job token: read from the environment, generated, compared.
#include "distribute/net/job_token.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "ops/error.h"

namespace est::distribute {
namespace {

constexpr size_t kMinimumLength = 16;

std::string validated(std::string token, const std::string& source) {
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() < kMinimumLength)
    throw InvalidArgumentError(fmt::format(
        "the job token from {} has {} characters; use at least {} (e.g. `export {}=$(head -c 16 "
        "/dev/urandom | od -An -tx1 | tr -d ' \\n')`)",
        source, token.size(), kMinimumLength, kJobTokenVariable));
  for (char c : token)
    if (c < 0x21 || c > 0x7e)
      throw InvalidArgumentError(fmt::format(
          "the job token from {} holds a character outside printable ASCII; gRPC metadata "
          "carries it, so use letters, digits and punctuation only",
          source));
  return token;
}

}  // namespace

std::string job_token_from_environment() {
  const char* token = std::getenv(kJobTokenVariable);
  const char* file = std::getenv(kJobTokenFileVariable);
  if (token && *token && file && *file)
    throw InvalidArgumentError(fmt::format("both {} and {} are set; set one of them", kJobTokenVariable,
                                           kJobTokenFileVariable));
  if (token && *token) return validated(token, kJobTokenVariable);
  if (file && *file) {
    std::ifstream in(file, std::ios::binary);
    if (!in)
      throw InvalidArgumentError(
          fmt::format("cannot read the job token file {} (named by {})", file, kJobTokenFileVariable));
    std::stringstream text;
    text << in.rdbuf();
    return validated(text.str(), fmt::format("{} ({})", kJobTokenFileVariable, file));
  }
  throw InvalidArgumentError(fmt::format(
      "this job has several tasks but no job token: set {} to the same secret on every task "
      "(e.g. `export {}=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')`), or {} to a "
      "file holding it; est-launch sets one for the tasks it starts",
      kJobTokenVariable, kJobTokenVariable, kJobTokenFileVariable));
}

std::string generate_job_token() {
  std::random_device random;  // /dev/urandom on Linux
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", random());
  return token;
}

bool tokens_equal(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

}  // namespace est::distribute
