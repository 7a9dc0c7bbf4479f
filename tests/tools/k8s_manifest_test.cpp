// The Kubernetes examples' manifests: the shell lines that build each pod's TF_CONFIG (between
// "# BEGIN tf_config" and "# END tf_config") run for every pod, with the variables Kubernetes
// would set, and give the layout est-launch gives. examples/k8s/multi_worker.yaml, a
// StatefulSet: `est-launch -n N`, pod 0 chief:0, pod i worker:i-1. examples/k8s/ps_job.yaml, an
// Indexed Job: `est-launch -n N --ps M`, index 0 chief:0, 1..N-1 worker:0..N-2, N..N+M-1
// ps:0..M-1. Every address is the pod's name under the headless Service; the manifests' task
// counts agree, and the token comes from a Secret through EST_JOB_TOKEN_FILE.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "distribute/cluster/tf_config.h"
#include "tests/command.h"

using namespace est::testing;
using namespace est::distribute;

#ifndef EST_SOURCE_ROOT
#error "EST_SOURCE_ROOT must name the source directory"
#endif

namespace {

std::string read_manifest(const std::string& name = "multi_worker.yaml") {
  std::ifstream in(std::string(EST_SOURCE_ROOT) + "/examples/k8s/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines between the markers, without their YAML indentation.
std::string tf_config_script(const std::string& manifest) {
  size_t begin = manifest.find("# BEGIN tf_config");
  size_t end = manifest.find("# END tf_config");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  begin = manifest.find('\n', begin) + 1;
  std::string script;
  std::istringstream lines(manifest.substr(begin, end - begin));
  std::string line;
  size_t indent = std::string::npos;
  while (std::getline(lines, line)) {
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    if (indent == std::string::npos) indent = first;
    REQUIRE_MESSAGE(first >= indent, line);
    script += line.substr(indent) + "\n";
  }
  return script;
}

// The script's TF_CONFIG with `variables` ("NAME=value ...") set, as Kubernetes sets them.
TfConfig run_script(const std::string& script, const std::string& variables) {
  ScratchDir dir;
  std::ofstream(dir / "tf_config.sh") << "set -eu\n" << script << "printf '%s' \"$TF_CONFIG\"\n";
  ProgramResult result =
      run_program("env " + variables + " /bin/sh " + shell_quote(dir / "tf_config.sh"), 30);
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  return parse_tf_config(result.output);
}

TfConfig run_for_pod(const std::string& script, int ordinal, int replicas) {
  return run_script(script, "POD_NAME=est-mw-" + std::to_string(ordinal) +
                                " NAMESPACE=team-a REPLICAS=" + std::to_string(replicas));
}

std::string address(int ordinal) {
  return "est-mw-" + std::to_string(ordinal) + ".est-mw.team-a.svc.cluster.local:2222";
}

}  // namespace

TEST_CASE("k8s manifest: each pod's TF_CONFIG from its ordinal, as est-launch lays tasks out") {
  std::string script = tf_config_script(read_manifest());
  for (int replicas : {1, 3}) {
    ClusterSpec::Jobs jobs{{TaskType::kChief, {address(0)}}};
    for (int i = 1; i < replicas; ++i) jobs[TaskType::kWorker].push_back(address(i));
    ClusterSpec expected(jobs);
    for (int ordinal = 0; ordinal < replicas; ++ordinal) {
      CAPTURE(replicas);
      CAPTURE(ordinal);
      TfConfig config = run_for_pod(script, ordinal, replicas);
      CHECK(config.cluster == expected);
      TaskSpec task =
          ordinal == 0 ? TaskSpec{TaskType::kChief, 0} : TaskSpec{TaskType::kWorker, ordinal - 1};
      CHECK(config.task == task);
    }
  }
}

TEST_CASE("k8s manifest: replica counts agree; the token comes from a Secret file") {
  std::string manifest = read_manifest();
  CHECK(manifest.find("replicas: 3\n") != std::string::npos);
  CHECK(manifest.find("- name: REPLICAS                       # = spec.replicas\n"
                      "              value: \"3\"") != std::string::npos);
  CHECK(manifest.find("name: EST_JOB_TOKEN_FILE") != std::string::npos);
  CHECK(manifest.find("secretName: est-job-token") != std::string::npos);
  CHECK(manifest.find("clusterIP: None") != std::string::npos);
  CHECK(manifest.find("serviceName: est-mw") != std::string::npos);
}

TEST_CASE("k8s ps job: each pod's TF_CONFIG from its index, as est-launch -n N --ps M lays out") {
  std::string script = tf_config_script(read_manifest("ps_job.yaml"));
  auto address = [](int index) {
    return "est-ps-" + std::to_string(index) + ".est-ps.team-a.svc.cluster.local:2222";
  };
  for (auto [workers, ps] : {std::pair{3, 1}, std::pair{1, 2}, std::pair{4, 3}}) {
    ClusterSpec::Jobs jobs{{TaskType::kChief, {address(0)}}};
    for (int i = 1; i < workers; ++i) jobs[TaskType::kWorker].push_back(address(i));
    for (int i = 0; i < ps; ++i) jobs[TaskType::kPs].push_back(address(workers + i));
    ClusterSpec expected(jobs);
    for (int index = 0; index < workers + ps; ++index) {
      CAPTURE(workers);
      CAPTURE(ps);
      CAPTURE(index);
      TfConfig config = run_script(
          script, "JOB_COMPLETION_INDEX=" + std::to_string(index) +
                      " JOB_NAME=est-ps NAMESPACE=team-a NUM_WORKERS=" + std::to_string(workers) +
                      " NUM_PS=" + std::to_string(ps));
      CHECK(config.cluster == expected);
      TaskSpec task = index == 0        ? TaskSpec{TaskType::kChief, 0}
                      : index < workers ? TaskSpec{TaskType::kWorker, index - 1}
                                        : TaskSpec{TaskType::kPs, index - workers};
      CHECK(config.task == task);
    }
  }
}

TEST_CASE("k8s ps job: task counts agree; names, Service and token as the Job's pods need") {
  std::string manifest = read_manifest("ps_job.yaml");
  auto has = [&](const std::string& text) { return manifest.find(text) != std::string::npos; };
  CHECK(has("completionMode: Indexed"));
  CHECK(has("completions: 4 "));  // NUM_WORKERS + NUM_PS
  CHECK(has("parallelism: 4 "));
  CHECK(
      has("- name: NUM_WORKERS"
          "                    # training tasks: the chief and the workers\n"
          "              value: \"3\""));
  CHECK(
      has("- name: NUM_PS                         # parameter servers\n"
          "              value: \"1\""));
  // The Job's pods are est-ps-<index> under the Service est-ps: the Job's name, the Service's
  // selector (the job-name label) and the pods' subdomain agree.
  CHECK(has("kind: Job\nmetadata:\n  name: est-ps\n"));
  CHECK(has("kind: Service\nmetadata:\n  name: est-ps\n"));
  CHECK(has("selector: {job-name: est-ps}"));
  CHECK(has("subdomain: est-ps "));
  CHECK(has("clusterIP: None"));
  CHECK(has("fieldPath: \"metadata.labels['job-name']\""));
  CHECK(has("name: EST_JOB_TOKEN_FILE"));
  CHECK(has("secretName: est-job-token"));
  CHECK(has("restartPolicy: OnFailure"));
}
