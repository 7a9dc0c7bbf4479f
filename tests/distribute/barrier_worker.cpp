// A task of the barrier test (barrier_test.cpp): joins a MultiWorkerMirroredStrategy job
// (TF_CONFIG and EST_JOB_TOKEN from the environment) and meets the others at a first barrier
// (so that every worker's strategy is up), then dies (SIGKILL, no goodbye: the other workers
// learn it from its missing heartbeats) or meets them at a second one.
//
//   barrier_worker die|meet
// Exit status: 0 after the barrier, 1 with "error: <message>" on an est::Error.
#include <signal.h>

#include <cstdio>
#include <string>

#include "distribute/distribute.h"

int main(int argc, char** argv) try {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "die" && mode != "meet") {
    std::fprintf(stderr, "usage: barrier_worker die|meet\n");
    return 2;
  }
  auto strategy = est::distribute::MultiWorkerMirroredStrategy::from_env(
      {.implementation = est::distribute::CommunicationImplementation::kRing},
      {.devices = {"/cpu:0"}});
  strategy->barrier("everyone joined");
  if (mode == "die") ::raise(SIGKILL);
  strategy->barrier("the test's meeting");
  return 0;
} catch (const est::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 1;
}
