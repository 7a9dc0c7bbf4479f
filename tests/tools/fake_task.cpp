// fake_task: a stand-in for a training program, for the est-launch tests. Its behaviour is the
// list of its arguments, run in order; an argument "TASK@ACTION" runs only in that task
// ("worker:1@exit:3"). The task is read from TF_CONFIG; "%t" in an argument becomes the task's
// label with '-' for ':' ("worker-1"), "%k" the job token.
//
//   config            print "task=chief:0 token=... token_file=... omp=... tf_config={...}"
//   say:TEXT          print TEXT and a newline on stdout; err:TEXT on stderr
//   partial:TEXT      print TEXT on stdout without a newline
//   record:PATH       append the config line to PATH (one write, O_APPEND)
//   pidfile:PATH      write this process's id to PATH
//   barrier:DIR       create DIR/<token>-<label>, then wait until every training task of the
//                     cluster (chief and workers) with this token has done so
//   await-reaped:PATH wait until the process whose id PATH holds is gone (reaped)
//   sleep:SECONDS     sleep (a stop signal still ends it, unless ignored)
//   wait-signal       sleep until a stop signal ends the process
//   ignore-stop       from now on SIGINT, SIGTERM and SIGHUP are reported and ignored
//   fail-once:PATH:N  if PATH does not exist, create it and exit with N
//   exit:N            exit with N;  kill:N  raise signal N
// Every stop signal is reported ("chief:0 got SIGTERM") before it ends the process (or is
// ignored). The process writes its id into $FAKE_TASK_PID_DIR (so a test can kill whatever is
// left) and ends itself after 60 s whatever it is doing; any wait that times out exits 99.
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "distribute/cluster/tf_config.h"

namespace {

using namespace est::distribute;

std::string g_label = "none";
char g_messages[65][96];  // "<label> got SIG...\n" per signal, built before handlers run
volatile sig_atomic_t g_ignore_stop = 0;

void write_all(int fd, const std::string& text) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n <= 0) return;
    data += n;
    left -= static_cast<size_t>(n);
  }
}

void on_stop_signal(int signal) {
  ssize_t ignored = ::write(STDOUT_FILENO, g_messages[signal], ::strlen(g_messages[signal]));
  (void)ignored;
  if (g_ignore_stop) return;
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

std::string getenv_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

void wait_for(const std::function<bool()>& done, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      write_all(2, g_label + " timed out waiting for " + what + "\n");
      std::_Exit(99);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void sleep_seconds(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

int main(int argc, char** argv) {
  ::alarm(60);
  TfConfig config = parse_tf_config(getenv_or("TF_CONFIG", "{}"));
  std::string token = getenv_or("EST_JOB_TOKEN", "");
  if (config.task)
    g_label =
        std::string(task_type_name(config.task->type)) + ":" + std::to_string(config.task->index);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    std::string message = g_label + " got SIG" + ::sigabbrev_np(signal) + "\n";
    ::snprintf(g_messages[signal], sizeof g_messages[signal], "%s", message.c_str());
    ::signal(signal, on_stop_signal);
  }
  if (const char* pid_dir = std::getenv("FAKE_TASK_PID_DIR"))
    std::ofstream(std::string(pid_dir) + "/" + std::to_string(::getpid())) << ::getpid();
  std::string file_label = replace_all(g_label, ":", "-");
  std::string config_line = "task=" + g_label + " token=" + token +
                            " token_file=" + getenv_or("EST_JOB_TOKEN_FILE", "") +
                            " omp=" + getenv_or("OMP_WAIT_POLICY", "") +
                            " tf_config=" + getenv_or("TF_CONFIG", "") + "\n";

  for (int i = 1; i < argc; ++i) {
    std::string arg = replace_all(replace_all(argv[i], "%t", file_label), "%k", token);
    if (size_t at = arg.find('@'); at != std::string::npos && arg.find(':') < at) {
      if (arg.substr(0, at) != g_label) continue;
      arg = arg.substr(at + 1);
    }
    size_t colon = arg.find(':');
    std::string action = arg.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : arg.substr(colon + 1);
    if (action == "config") {
      write_all(1, config_line);
    } else if (action == "say") {
      write_all(1, value + "\n");
    } else if (action == "err") {
      write_all(2, value + "\n");
    } else if (action == "partial") {
      write_all(1, value);
    } else if (action == "record") {
      int fd = ::open(value.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      write_all(fd, config_line);
      ::close(fd);
    } else if (action == "pidfile") {  // written whole, then renamed: never seen half-written
      std::ofstream(value + ".tmp") << ::getpid();
      std::filesystem::rename(value + ".tmp", value);
    } else if (action == "barrier") {
      std::ofstream(value + "/" + token + "-" + file_label) << "";
      std::vector<std::string> names;
      for (TaskType type : {TaskType::kChief, TaskType::kWorker})
        for (int t = 0; t < config.cluster.num_tasks(type); ++t)
          names.push_back(value + "/" + token + "-" + std::string(task_type_name(type)) + "-" +
                          std::to_string(t));
      wait_for(
          [&] {
            for (const std::string& name : names)
              if (!std::filesystem::exists(name)) return false;
            return true;
          },
          "the barrier in " + value);
    } else if (action == "await-reaped") {
      wait_for([&] { return std::filesystem::exists(value); }, value);
      pid_t pid = 0;
      std::ifstream(value) >> pid;
      if (pid <= 0) {
        write_all(2, g_label + ": no process id in " + value + "\n");
        return 97;
      }
      wait_for([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }, "process " + value);
    } else if (action == "sleep") {
      sleep_seconds(std::stod(value));
    } else if (action == "wait-signal") {
      sleep_seconds(60);
    } else if (action == "ignore-stop") {
      g_ignore_stop = 1;
      for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
        std::string message = g_label + " got SIG" + ::sigabbrev_np(signal) + " (ignored)\n";
        ::snprintf(g_messages[signal], sizeof g_messages[signal], "%s", message.c_str());
      }
    } else if (action == "fail-once") {
      size_t split = value.rfind(':');
      std::string marker = value.substr(0, split);
      if (!std::filesystem::exists(marker)) {
        std::ofstream(marker) << "";
        return std::stoi(value.substr(split + 1));
      }
    } else if (action == "exit") {
      return std::stoi(value);
    } else if (action == "kill") {
      ::signal(std::stoi(value), SIG_DFL);
      ::raise(std::stoi(value));
    } else {
      write_all(2, "fake_task: unknown action '" + arg + "'\n");
      return 98;
    }
  }
  return 0;
}
