// Starting one task: a child process with its own environment, its stdout and stderr on pipes
// the launcher reads, in a process group of its own.
//
// Why each setting:
//   - its own process group (setpgid): a Ctrl-C in the terminal reaches the launcher alone,
//     which passes it on to every task, and stopping a task signals its whole group (the task
//     and whatever it started);
//   - PR_SET_PDEATHSIG = SIGKILL: if the launcher itself is killed (SIGKILL, OOM killer), the
//     tasks die with it instead of training on as orphans that hold the ports;
//   - stdin is /dev/null: tasks in a background process group that read the terminal would be
//     stopped by SIGTTIN;
//   - the launcher's blocked signals and ignored SIGPIPE are reset, since exec keeps both.
// A program that cannot be executed is reported on the task's stderr and the child exits with
// 127 (not found) or 126 (not executable), as a shell does.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "distribute/cluster/slurm.h"  // distribute::Environment

namespace est::launch {

using distribute::Environment;

struct ChildProcess {
  pid_t pid = -1;      // also its process group's id
  int stdout_fd = -1;  // read ends, non-blocking and close-on-exec; the caller closes them
  int stderr_fd = -1;
};

// Starts `argv` (argv[0] looked up in PATH unless it holds a '/') with exactly `environment`.
// `child_mask` is the signal mask the program starts with (the launcher's mask before it
// blocked its signals). UnavailableError when a pipe or fork fails.
ChildProcess spawn_child(const std::vector<std::string>& argv, const Environment& environment,
                         const sigset_t& child_mask);

// Sends `signal` to the task's process group, or to the task alone when it has left its group.
void signal_task(pid_t pid, int signal);

// The path execvp would run for `program` (as given when it holds a '/'); empty when it names
// nothing executable. Lets the launcher refuse a misspelt program before starting a job.
std::string find_program(const std::string& program, const Environment& environment);

}  // namespace est::launch
