// What the multi-process ps tests read of their task programs (ps_job_task, ps_fashion_task):
// the chief's final "eval: loss=... accuracy=... global_step=..." line, and the JSON list of
// `count` free 127.0.0.1 addresses a TF_CONFIG job takes.
#pragma once

#include <cmath>
#include <regex>
#include <string>

#include "tests/process_group.h"

namespace est::testing {

struct Eval {
  double loss = NAN, accuracy = NAN;
  long long global_step = -1;
};

inline Eval parse_eval(const std::string& output) {
  std::smatch m;
  Eval eval;
  if (std::regex_search(
          output, m, std::regex(R"(eval: loss=([0-9.]+) accuracy=([0-9.]+) global_step=(\d+))"))) {
    eval.loss = std::stod(m[1]);
    eval.accuracy = std::stod(m[2]);
    eval.global_step = std::stoll(m[3]);
  }
  return eval;
}

// "\"127.0.0.1:p1\", \"127.0.0.1:p2\"": `count` free ports.
inline std::string loopback_addresses(int count) {
  std::string text;
  for (int i = 0; i < count; ++i)
    text += (i ? ", \"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(free_port()) + "\"";
  return text;
}

}  // namespace est::testing
