// Calibrated kernel choice (ops/kernel_calibration.h): the fastest of injected timings wins
// (past the margin that keeps the table's), choices are cached by CPU model and shape in memory
// and in the cache file, a corrupt file is ignored with a warning, EST_KERNEL_CALIBRATION=0 keeps
// the static table, and two seeded training runs with calibration on give the same weights.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/kernel_calibration.h"
#include "ops/logging.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "tests/command.h"

using namespace est;
using namespace est::ops;

namespace {

// Log lines written while the capture lives.
class LogCapture {
 public:
  LogCapture() {
    log::set_level(log::Level::kInfo);
    previous_ =
        log::set_sink([this](log::Level, std::string_view line) { lines.emplace_back(line); });
  }
  ~LogCapture() {
    log::set_sink(previous_);
    log::set_level_from_environment();
  }
  bool contains(const std::string& text) const {
    for (const std::string& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
  std::vector<std::string> lines;

 private:
  log::Sink previous_;
};

// Restores EST_KERNEL_CALIBRATION and the switch when the test ends.
class CalibrationEnvironment {
 public:
  explicit CalibrationEnvironment(const char* value) {
    if (const char* old = std::getenv("EST_KERNEL_CALIBRATION")) old_ = old;
    ::setenv("EST_KERNEL_CALIBRATION", value, 1);
    set_kernel_calibration_from_environment();
  }
  ~CalibrationEnvironment() {
    if (old_.empty())
      ::unsetenv("EST_KERNEL_CALIBRATION");
    else
      ::setenv("EST_KERNEL_CALIBRATION", old_.c_str(), 1);
    set_kernel_calibration_from_environment();
  }

 private:
  std::string old_;
};

// A timer that returns fixed seconds per candidate and counts its calls.
struct FakeTimer {
  std::vector<double> seconds;
  int calls = 0;
  CandidateTimer timer() {
    return [this](size_t index) {
      ++calls;
      return seconds[index];
    };
  }
};

// One conv2d (28x28x1 -> 32 channels, relu) + dense step at `batch`, its weight gradient applied
// with learning rate 0.1, three times from a seeded start; returns the conv kernel and the dense
// weights after the last step.
std::vector<float> seeded_training(int64_t batch) {
  Generator generator(42);
  Tensor images = random_uniform({batch, 28, 28, 1}, 0, 1, generator);
  Tensor kernel = random_uniform({3, 3, 1, 32}, -0.3, 0.3, generator);
  Tensor dense = random_uniform({13 * 13 * 32, 10}, -0.05, 0.05, generator);
  for (int step = 0; step < 3; ++step) {
    kernel.set_requires_grad(true);
    dense.set_requires_grad(true);
    Tensor h = conv2d(images, kernel, Tensor(), {.activation = Activation::kRelu});
    h = max_pool2d(h, {});
    Tensor logits = linear(h.reshape({batch, -1}), dense, Tensor(), Activation::kNone);
    backward(sum(log_softmax(logits, -1)));
    kernel = (kernel.detach() - mul(kernel.grad(), 0.1)).detach();
    dense = (dense.detach() - mul(dense.grad(), 0.1)).detach();
  }
  std::vector<float> weights = kernel.to_vector<float>();
  for (float v : dense.to_vector<float>()) weights.push_back(v);
  return weights;
}

}  // namespace

TEST_CASE("calibration: the faster of two candidates wins, past the table's margin") {
  FakeTimer timer{{2e-3, 1e-3}};
  std::vector<double> best;
  CHECK(fastest_candidate(2, 0, 3, timer.timer(), &best) == 1);
  // One warm-up and three timed calls each, then three more each: leaving the table is confirmed.
  CHECK(timer.calls == 2 * (1 + 3 + 3));
  CHECK(best == std::vector<double>{2e-3, 1e-3});
  FakeTimer agrees{{1e-3, 2e-3}};
  CHECK(fastest_candidate(2, 0, 3, agrees.timer()) == 0);
  CHECK(agrees.calls == 2 * (1 + 3));  // the table's choice stands without more rounds
  // The table's candidate stalled (a preempted call) in the first rounds: timed again, it stays.
  int preferred_calls = 0;
  auto stalled_then_fast = [&](size_t index) {
    if (index == 1) return 0.95e-3;
    return ++preferred_calls <= 4 ? 10e-3 : 1e-3;  // warm-up and three stalled timed calls
  };
  CHECK(fastest_candidate(2, 0, 3, stalled_then_fast) == 0);
  // The preferred (the table's) candidate stays unless another beats it by the margin.
  FakeTimer close{{1e-3, 0.95e-3}};
  CHECK(fastest_candidate(2, 0, 3, close.timer()) == 0);
  FakeTimer far{{1e-3, 0.5e-3}};
  CHECK(fastest_candidate(2, 0, 3, far.timer()) == 1);
  // A candidate that cannot run the case (infinite time) never wins.
  FakeTimer declined{{std::numeric_limits<double>::infinity(), 5e-3}};
  CHECK(fastest_candidate(2, 0, 3, declined.timer()) == 1);
  FakeTimer three{{3e-3, 2e-3, 1e-3}};
  CHECK(fastest_candidate(3, 1, 3, three.timer()) == 2);
}

TEST_CASE("calibration: a choice is cached by CPU model and shape, in memory and on disk") {
  testing::ScratchDir dir;
  const std::vector<Backend> candidates{Backend::kReference, Backend::kOneDnn};
  const std::string shape_a = "conv2d f32 64x28x28x1;", shape_b = "conv2d f32 256x28x28x1;";
  {
    KernelChoiceCache cache("Model A avx2", dir.str());
    FakeTimer onednn_faster{{2e-3, 1e-3}};
    LogCapture log;
    CHECK(calibrated_backend(cache, shape_a, candidates, Backend::kReference,
                             onednn_faster.timer()) == Backend::kOneDnn);
    CHECK(log.contains("kernel calibration: " + shape_a + " -> onednn"));
    // Cached: the second lookup times nothing.
    const int calls = onednn_faster.calls;
    CHECK(calibrated_backend(cache, shape_a, candidates, Backend::kReference,
                             onednn_faster.timer()) == Backend::kOneDnn);
    CHECK(onednn_faster.calls == calls);
    // Another shape is calibrated on its own.
    FakeTimer reference_faster{{1e-3, 2e-3}};
    CHECK(calibrated_backend(cache, shape_b, candidates, Backend::kOneDnn,
                             reference_faster.timer()) == Backend::kReference);
    CHECK(reference_faster.calls > 0);
    CHECK(cache.size() == 2);
  }
  // A new process on the same CPU model reads both choices from the file.
  KernelChoiceCache same_model("Model A avx2", dir.str());
  CHECK(same_model.find(shape_a) == Backend::kOneDnn);
  CHECK(same_model.find(shape_b) == Backend::kReference);
  // Another CPU model has its own file: nothing of model A's applies.
  KernelChoiceCache other_model("Model B avx512f", dir.str());
  CHECK(other_model.path() != same_model.path());
  CHECK_FALSE(other_model.find(shape_a).has_value());
  // Without a directory the cache is the process's only.
  KernelChoiceCache memory_only("Model A avx2");
  CHECK(memory_only.path().empty());
  CHECK_FALSE(memory_only.find(shape_a).has_value());
}

// Sets (or, with nullptr, unsets) an environment variable for the scope.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_CASE("calibration: the cache file's directory") {
  ScopedVariable home("HOME", "/home/someone"), xdg("XDG_CACHE_HOME", nullptr);
  {
    ScopedVariable chosen("EST_KERNEL_CALIBRATION_CACHE", nullptr);
    CHECK(calibration_cache_directory() == "/home/someone/.cache/est");
    ScopedVariable xdg_set("XDG_CACHE_HOME", "/var/cache/me");
    CHECK(calibration_cache_directory() == "/var/cache/me/est");
  }
  {
    ScopedVariable chosen("EST_KERNEL_CALIBRATION_CACHE", "/tmp/choices");
    CHECK(calibration_cache_directory() == "/tmp/choices");
  }
  ScopedVariable off("EST_KERNEL_CALIBRATION_CACHE", "0");
  CHECK(calibration_cache_directory().empty());
  CHECK(KernelChoiceCache("Model", calibration_cache_directory()).path().empty());
}

TEST_CASE("calibration: a corrupt cache file is ignored with a warning, then rewritten") {
  testing::ScratchDir dir;
  const std::string path = KernelChoiceCache("Model A", dir.str()).path();
  for (const std::string& content : std::vector<std::string>{
           "garbage\n", "# est kernel choices for cpu: Model A\nkey without tab\n",
           "# est kernel choices for cpu: Model A\nkey\tcuda\n",
           "# est kernel choices for cpu: Model Z\nkey\tonednn\n"}) {
    std::ofstream(path) << content;
    KernelChoiceCache cache("Model A", dir.str());
    LogCapture log;
    CHECK_FALSE(cache.find("key").has_value());
    CHECK(log.contains("kernel calibration: ignoring " + path));
    // Measured again and written afresh: a later process reads the new choice.
    FakeTimer timer{{1e-3, 2e-3}};
    CHECK(calibrated_backend(cache, "key", {Backend::kReference, Backend::kOneDnn},
                             Backend::kOneDnn, timer.timer()) == Backend::kReference);
    CHECK(KernelChoiceCache("Model A", dir.str()).find("key") == Backend::kReference);
  }
}

TEST_CASE("calibration: EST_KERNEL_CALIBRATION=0 keeps the static table at every shape") {
  if (!backend_available(Backend::kOneDnn)) return;  // one CPU backend: nothing to choose
  Generator generator(5);
  // 40 x 30 x 30 x 1 images: a shape no other test uses, so that its choice is not cached yet.
  Tensor images = random_uniform({40, 30, 30, 1}, 0, 1, generator);
  Tensor kernel = random_uniform({3, 3, 1, 32}, -1, 1, generator);
  const Backend table = preferred_cpu_backend(OpKind::kConvForward);
  {
    CalibrationEnvironment off("0");
    CHECK_FALSE(kernel_calibration_enabled());
    const size_t cached = KernelChoiceCache::global().size();
    const int64_t before = dispatch_count(OpKind::kConvForward, table);
    LogCapture log;
    conv2d(images, kernel, Tensor(), {});
    CHECK(dispatch_count(OpKind::kConvForward, table) == before + 1);
    CHECK(KernelChoiceCache::global().size() == cached);
    CHECK_FALSE(log.contains("kernel calibration"));
  }
  {
    CalibrationEnvironment on("1");
    CHECK(kernel_calibration_enabled());
    const size_t cached = KernelChoiceCache::global().size();
    LogCapture log;
    conv2d(images, kernel, Tensor(), {});
    CHECK(KernelChoiceCache::global().size() == cached + 1);  // this shape, calibrated once
    CHECK(log.contains("kernel calibration: conv2d float32 40x30x30x1;"));
    conv2d(images, kernel, Tensor(), {});
    CHECK(KernelChoiceCache::global().size() == cached + 1);
    // Small work keeps the table without timing anything.
    conv2d(random_uniform({1, 8, 8, 1}, 0, 1, generator), kernel, Tensor(), {});
    CHECK(KernelChoiceCache::global().size() == cached + 1);
    // A BackendGuard still forces its backend.
    BackendGuard guard(Backend::kReference);
    const int64_t before = dispatch_count(OpKind::kConvForward, Backend::kReference);
    conv2d(random_uniform({40, 31, 31, 1}, 0, 1, generator), kernel, Tensor(), {});
    CHECK(dispatch_count(OpKind::kConvForward, Backend::kReference) == before + 1);
    CHECK(KernelChoiceCache::global().size() == cached + 1);
  }
}

TEST_CASE("calibration: two seeded training runs with calibration on give the same weights") {
  CalibrationEnvironment on("1");
  const size_t cached = KernelChoiceCache::global().size();
  // Batch 48: shapes no other test calibrates, so the first run makes the choices.
  const std::vector<float> first = seeded_training(48);
  if (backend_available(Backend::kOneDnn)) CHECK(KernelChoiceCache::global().size() > cached);
  const std::vector<float> second = seeded_training(48);
  REQUIRE(first.size() == second.size());
  CHECK(first == second);  // bit for bit
}
