// A training step on an embedding table with row-sparse gradients (TF's IndexedSlices: the
// optimizer moves the rows the batch read) against the same step with the gradient densified
// first (what the step cost before row-sparse gradients: a table-sized gradient, every row
// updated). Table --rows x --dim float32, --batch ids per step drawn uniformly (repeats summed),
// loss = mean(square(lookup)). Prints the median step time of each, their ratio, and the bytes
// of the table's gradient each way; also what a 2-replica mirrored all-reduce would move
// (distribute/sparse_all_reduce.h gathers the rows when that is fewer bytes than the table).
// adam decays every row in both modes (TF1's AdamOptimizer), so it is listed for its cost only;
// lazy_adam is the row-sparse one.
//
//   sparse_update_bench [--rows N] [--dim D] [--batch B] [--threads T] [--steps S] [--repeats R]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <est/nn/nn.h>
#include <est/ops/ops.h>

namespace {

using est::Tensor;
using Clock = std::chrono::steady_clock;
namespace ops = est::ops;
namespace nn = est::nn;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Setup {
  int64_t rows, dim, batch;
};

// One step: lookup, loss, row-sparse gradients (densified when `dense`), update. Returns the
// table gradient's bytes as the optimizer received them.
size_t step(nn::VariableStore& store, const est::optim::Optimizer& optimizer, const Setup& setup,
            ops::Generator& generator, bool dense) {
  std::vector<int64_t> ids(static_cast<size_t>(setup.batch));
  for (int64_t& id : ids) id = static_cast<int64_t>(generator.next_u64() % uint64_t(setup.rows));
  nn::ModelContext ctx(store, nn::Mode::kTrain, 1);
  Tensor x = nn::embedding(ctx, Tensor::from_vector(ids),
                           {.input_dim = setup.rows, .output_dim = setup.dim});
  Tensor loss = ops::mean(ops::square(x));
  nn::TrainOp train_op = optimizer.minimize(loss, ctx);
  std::vector<nn::GradAndVar> grads = train_op.compute_gradients();
  size_t bytes = 0;
  for (nn::GradAndVar& entry : grads) {
    if (dense) entry.densify();
    bytes +=
        entry.sparse_gradient.defined() ? entry.sparse_gradient.nbytes() : entry.gradient.nbytes();
  }
  train_op.apply(std::move(grads));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("row-sparse against densified embedding updates");
  Setup setup{1'000'000, 16, 256};
  int threads = 2, steps = 10, repeats = 3;
  app.add_option("--rows", setup.rows, "table rows")->capture_default_str();
  app.add_option("--dim", setup.dim, "embedding dimension")->capture_default_str();
  app.add_option("--batch", setup.batch, "ids per step")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads")->capture_default_str();
  app.add_option("--steps", steps, "steps per repeat")->capture_default_str();
  app.add_option("--repeats", repeats, "timed repeats (median)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ops::set_num_threads(threads);

  struct Case {
    std::string name;
    std::function<est::optim::Optimizer()> make;
  };
  const std::vector<Case> cases{
      {"sgd", [] { return est::optim::sgd(0.1); }},
      {"adagrad", [] { return est::optim::adagrad(0.1); }},
      {"ftrl", [] { return est::optim::ftrl(0.1); }},
      {"momentum", [] { return est::optim::momentum(0.1, 0.9); }},
      {"lazy_adam", [] { return est::optim::lazy_adam(0.001); }},
      {"adam", [] { return est::optim::adam(0.001); }},
  };
  const size_t table_bytes = static_cast<size_t>(setup.rows * setup.dim) * sizeof(float);
  // 2 replicas' rows gathered (indices int64 and values) against the dense table.
  const size_t gathered_bytes =
      2 * static_cast<size_t>(setup.batch) * (sizeof(int64_t) + setup.dim * sizeof(float));
  for (const Case& c : cases) {
    nn::VariableStore sparse_store, dense_store;
    ops::Generator sparse_ids(7), dense_ids(7);
    const est::optim::Optimizer optimizer = c.make();
    size_t sparse_bytes = step(sparse_store, optimizer, setup, sparse_ids, false);  // warm-up
    size_t dense_bytes = step(dense_store, optimizer, setup, dense_ids, true);
    std::vector<double> sparse_times, dense_times;
    auto time = [&](nn::VariableStore& store, ops::Generator& ids, bool dense) {
      auto start = Clock::now();
      for (int s = 0; s < steps; ++s) step(store, optimizer, setup, ids, dense);
      return std::chrono::duration<double>(Clock::now() - start).count() / steps;
    };
    for (int r = 0; r < repeats; ++r) {
      sparse_times.push_back(time(sparse_store, sparse_ids, false));
      dense_times.push_back(time(dense_store, dense_ids, true));
    }
    const double sparse_s = median(sparse_times), dense_s = median(dense_times);
    fmt::print(
        "est optimizer={} rows={} dim={} batch={} threads={} sparse_ms={:.3f} dense_ms={:.3f} "
        "dense_over_sparse={:.1f} gradient_bytes_sparse={} gradient_bytes_dense={} "
        "allreduce_bytes_2_replicas_gathered={} allreduce_bytes_dense={}\n",
        c.name, setup.rows, setup.dim, setup.batch, threads, sparse_s * 1e3, dense_s * 1e3,
        dense_s / sparse_s, sparse_bytes, dense_bytes, gathered_bytes, table_bytes);
  }
}
