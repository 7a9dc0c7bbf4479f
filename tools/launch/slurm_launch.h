// `srun est-launch --slurm [--port-base P] [--ps M] [--evaluator] -- program args`: one est-launch
// per SLURM task; each sets its task's TF_CONFIG from SLURM's environment
// (distribute/cluster/slurm.h, tf.distribute's SlurmClusterResolver) and execs the program in its
// place.
//
// Why exec and not supervise: under srun, SLURM is already the supervisor. It starts the
// tasks on every node, prefixes output (srun --label), passes signals on, and ends the step
// when a task fails (srun --kill-on-bad-exit=1); a second supervisor on each node would only
// hide the program's exit status and signals from it. Restarts are the batch script's loop
// around srun (the program resumes from its checkpoint).
//
// Layout: as `est-launch -n N`: rank 0 is the chief, the other ranks workers, i.e.
// SlurmClusterResolver(jobs={"chief": 1, "worker": N - 1}); with --evaluator,
// jobs={"chief": 1, "evaluator": 1, "worker": N - 2}: the resolver gives ranks to jobs in the
// order of their names, so the evaluator is rank 1, and lists it in the cluster, as -n N does
// (tools/launch/job_plan.h says why it must be listed). With --ps M, M ps tasks (TF1's parameter
// servers): jobs={"chief": 1, "ps": M, "worker": N - 1 - M} (and "evaluator": 1), so in the
// order of the names the ps tasks take the ranks after the chief (and the evaluator), as
// SlurmClusterResolver(jobs={"ps": M, "worker": ...}) gives its ps tasks the first ranks. Tasks
// on one node listen on port_base, port_base + 1, ...
//
// The token: the tasks of a step run on several machines, so no one of them can make it up for
// the others. It is taken from the environment srun passes on (EST_JOB_TOKEN, or
// EST_JOB_TOKEN_FILE on a shared file system); a step of several tasks without either is
// refused with the command that sets one (`export EST_JOB_TOKEN=$(est-launch --generate-token)`).
#pragma once

#include <string>
#include <vector>

#include "distribute/cluster/slurm.h"

namespace est::launch {

struct SlurmLaunchOptions {
  int port_base = 8888;  // SlurmClusterResolver's default
  bool evaluator = false;
  int num_ps = 0;  // ps tasks
};

struct SlurmLaunch {
  distribute::SlurmTask task;
  distribute::Environment environment;  // the program's: TF_CONFIG set, OMP_WAIT_POLICY maybe
};

// This srun task's TF_CONFIG and environment. InvalidArgumentError when the environment is not
// an srun step's, is malformed (distribute/cluster/slurm.h), has no token for several tasks, or has
// too few tasks for the layout (the chief, the evaluator and the ps tasks asked for).
SlurmLaunch prepare_slurm_launch(const distribute::Environment& environment,
                                 const SlurmLaunchOptions& options);

// Replaces this process with `command` in `environment`; returns only when exec fails, after
// saying why: 127 when the program is not found, 126 otherwise (a shell's codes).
int exec_program(const std::vector<std::string>& command,
                 const distribute::Environment& environment);

}  // namespace est::launch
