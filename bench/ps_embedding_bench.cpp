// An embedding model on a parameter server: bytes a step moves against the rows it reads.
//
// A table of 1M rows x 16 float32 (64 MB) on one `ps` task (in this process, on loopback), and
// one worker (ParameterServerStrategy's chief) whose steps look up 4 ids for each of 256
// examples (uniform over the table), average them, and fit a dense unit with Adagrad. The table
// is read through nn::embedding, so a step pulls only the rows its batch reads and pushes their
// gradients as rows (TF's embedding_lookup and IndexedSlices on a ps). Figures: the bytes the
// worker moves per step (push and pull, frame headers included, from PsClient's count) against
// the least a row read can move: its id out and its row back when pulled, its id and gradient
// row out when pushed (2 x (8 + 4 x 16) = 144 bytes a distinct row). For comparison, the same
// model reading the table whole (get_variable and gather: pulled whole every step), which is
// what every step moved before rows moved alone.
//
//   ps_embedding_bench [--rows 1000000] [--dimension 16] [--batch 256] [--ids 4] [--steps 20]
//                      [--whole-steps 3]
// Lines: `rows_read_per_step=...` (distinct), `by_rows bytes_per_step=... per_row_read=...
// limit_per_row=... ratio=...`, `whole bytes_per_step=... table_bytes=... ratio=...`.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <est/distribute/ps/parameter_server_strategy.h>
#include <est/distribute/ps/ps_server.h>
#include <est/nn/nn.h>
#include <est/ops/array_ops.h>
#include <est/ops/math.h>

namespace {

using est::Tensor;
namespace dist = est::distribute;

struct Options {
  int64_t rows = 1000000, dimension = 16, batch = 256, ids = 4;
};

struct Measured {
  double bytes_per_step = 0;
  double rows_per_step = 0;  // distinct rows read
  double seconds_per_step = 0;
};

// `steps` measured steps (after 2 warm-up steps) of the model, the table read by rows or whole.
Measured run(const Options& o, int steps, bool whole) {
  const std::string token = "ps-embedding-bench-token-0123";
  dist::PsServer server({.address = "127.0.0.1:0",
                         .token = token,
                         .task_index = 0,
                         .num_workers = 1,
                         .optimizer = est::optim::adagrad(0.1)});
  dist::TfConfig config{.cluster = dist::ClusterSpec({{dist::TaskType::kChief, {"127.0.0.1:1"}},
                                                      {dist::TaskType::kPs, {server.address()}}}),
                        .task = dist::TaskSpec{dist::TaskType::kChief, 0}};
  dist::ParameterServerStrategy chief(config, {.token = token});
  std::mt19937_64 random(7);
  std::uniform_int_distribution<int64_t> draw(0, o.rows - 1);
  double rows_read = 0;
  auto step = [&](bool counted) {
    std::vector<int64_t> ids(static_cast<size_t>(o.batch * o.ids));
    for (int64_t& id : ids) id = draw(random);
    if (counted) rows_read += static_cast<double>(std::set<int64_t>(ids.begin(), ids.end()).size());
    Tensor id_tensor = Tensor::from_vector(ids, {o.batch, o.ids});
    Tensor labels = Tensor::full({o.batch, 1}, 1.0);
    chief.run([&](dist::ReplicaContext& replica) {
      est::ModelContext& ctx = replica.model_context();
      ctx.begin_call();
      const est::nn::Initializer init = est::nn::random_uniform();
      Tensor embedded;  // [batch, ids, dimension]
      if (whole) {
        Tensor table =
            ctx.get_variable("embedding/embeddings", {o.rows, o.dimension}, est::DType::kF32, init);
        embedded = est::ops::gather(table, id_tensor);
      } else {
        embedded = est::nn::embedding(
            ctx, id_tensor,
            {.input_dim = o.rows, .output_dim = o.dimension, .embeddings_initializer = init});
      }
      Tensor mean = est::ops::mul(est::ops::sum(embedded, {1}), 1.0 / static_cast<double>(o.ids));
      Tensor out = est::nn::dense(ctx, mean, {.units = 1});
      Tensor loss = est::ops::mul(est::ops::sum(est::ops::squared_difference(out, labels)),
                                  1.0 / static_cast<double>(o.batch));
      replica.run_train_op(est::optim::adagrad(0.1).minimize(loss, ctx));
      return loss;
    });
  };
  for (int s = 0; s < 2; ++s) step(false);
  uint64_t before = chief.bytes_sent() + chief.bytes_received();
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step(true);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t moved = chief.bytes_sent() + chief.bytes_received() - before;
  return {.bytes_per_step = static_cast<double>(moved) / steps,
          .rows_per_step = rows_read / steps,
          .seconds_per_step = seconds / steps};
}

}  // namespace

int main(int argc, char** argv) try {
  Options o;
  int steps = 20, whole_steps = 3;
  CLI::App app("Bytes per step of an embedding model on a ps task against the rows it reads.",
               "ps_embedding_bench");
  app.add_option("--rows", o.rows, "table rows")->capture_default_str();
  app.add_option("--dimension", o.dimension, "table columns")->capture_default_str();
  app.add_option("--batch", o.batch, "examples per step")->capture_default_str();
  app.add_option("--ids", o.ids, "ids per example")->capture_default_str();
  app.add_option("--steps", steps, "measured steps, table read by rows")->capture_default_str();
  app.add_option("--whole-steps", whole_steps, "measured steps, table read whole (0: skip)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const double table_bytes = static_cast<double>(o.rows * o.dimension * 4);
  const double limit_per_row = 2.0 * (8.0 + 4.0 * static_cast<double>(o.dimension));
  fmt::print("table_rows={} dimension={} table_bytes={:.0f} batch={} ids_per_example={}\n", o.rows,
             o.dimension, table_bytes, o.batch, o.ids);
  Measured rows = run(o, steps, false);
  fmt::print("rows_read_per_step={:.1f}\n", rows.rows_per_step);
  fmt::print(
      "by_rows bytes_per_step={:.0f} per_row_read={:.1f} limit_per_row={:.0f} ratio={:.3f} "
      "ms_per_step={:.1f}\n",
      rows.bytes_per_step, rows.bytes_per_step / rows.rows_per_step, limit_per_row,
      rows.bytes_per_step / (rows.rows_per_step * limit_per_row), rows.seconds_per_step * 1e3);
  if (whole_steps > 0) {
    Measured whole = run(o, whole_steps, true);
    fmt::print("whole bytes_per_step={:.0f} table_bytes={:.0f} ratio={:.3f} ms_per_step={:.1f}\n",
               whole.bytes_per_step, table_bytes, whole.bytes_per_step / table_bytes,
               whole.seconds_per_step * 1e3);
    fmt::print("by_rows/whole bytes={:.5f}\n", rows.bytes_per_step / whole.bytes_per_step);
  }
  return 0;
} catch (const est::Error& error) {
  fmt::print(stderr, "error: {}\n", error.what());
  return 1;
}
