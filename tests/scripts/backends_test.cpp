// The backend line that ./run.sh and ./test.sh print (<build>/backends.txt, written by meson at
// configure time) says what this build really has: oneDNN and CUDA as the ops library reports
// them (CUDA: built, whether or not this machine has a GPU).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ops/backend.h"

#ifndef EST_BACKENDS_FILE
#error "EST_BACKENDS_FILE must name <build>/backends.txt"
#endif

TEST_CASE("backends.txt matches the backends the ops library was built with") {
  std::ifstream file(EST_BACKENDS_FILE);
  REQUIRE_MESSAGE(file.good(), "cannot read ", EST_BACKENDS_FILE);
  std::stringstream text;
  text << file.rdbuf();
  std::smatch match;
  const std::string content = text.str();
  REQUIRE_MESSAGE(std::regex_match(content, match,
                                   std::regex("Backends: oneDNN (on|off), CUDA (on|off), "
                                              "gRPC (on|off)\n")),
                  content);
  using est::ops::Backend;
  CHECK((match[1] == "on") == est::ops::backend_available(Backend::kOneDnn));
  CHECK((match[2] == "on") == est::ops::backend_built(Backend::kCuda));
}
