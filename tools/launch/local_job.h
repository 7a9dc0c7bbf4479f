// A job on this machine (`est-launch -n N [--evaluator] [--max-restarts K] -- program ...`):
// attempts of run_attempt, each with fresh ports and a fresh job token, until one succeeds,
// the launcher is stopped, or K restarts have been spent.
//
// A restart restarts every task, not only the one that failed: the tasks of a synchronous job
// cannot go on without a peer (the others have already stopped or are about to), and each
// attempt must start with the same view of the job. The program resumes from its model_dir's
// last checkpoint, so a job restarted after a failure ends where an uninterrupted one would.
// New ports avoid a port still held by a dying task of the previous attempt (or taken by
// another program meanwhile); a new token keeps a straggler of the previous attempt out of the
// new one. Only a failure of a training task restarts the job; a stop signal never does.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tools/launch/line_prefixer.h"
#include "tools/launch/signal_channel.h"

namespace est::launch {

struct LocalJobOptions {
  int num_workers = 1;  // the chief and the workers
  bool evaluator = false;
  int num_ps = 0;  // ps tasks (TF1's parameter servers)
  int max_restarts = 0;
  std::chrono::milliseconds grace_period{30'000};
  std::vector<std::string> command;
  LinePrefixer::Sink stdout_sink;
  LinePrefixer::Sink stderr_sink;
};

struct JobResult {
  int exit_code = 0;         // 0, or the failed task's status as a shell reports it
  int interrupt_signal = 0;  // non-zero: the launcher was stopped by this signal
};

JobResult run_local_job(const LocalJobOptions& options, SignalChannel& signals);

// A new job token: distribute/net/job_token.h's generate_job_token() (32 random hexadecimal
// characters); the same from /dev/urandom in a build without gRPC, where that file is absent.
std::string new_job_token();

}  // namespace est::launch
