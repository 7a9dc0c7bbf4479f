// PsVariables: a worker's view of the variables that live on the `ps` tasks. The worker's
// VariableStore is a cache of them: model_fn computes with it, and each step replaces it with
// fresh values.
//
//   initialize (the chief, once the variables exist or were restored): every value goes to the
//              task that holds it (PsPlacement), slots beside their variable, global_step to
//              ps 0; values of other names (an optimizer's beta1_power) to every task;
//   pull       (the other workers): waits until the chief has initialized every task;
//   push_pull  (each step): the gradients of each task's variables and the request for their
//              fresh values in one message, one round trip per ps task for the whole step;
//              a partitioned variable's gradient is cut into its parts and its parts' values
//              are joined again; a row-sparse gradient (an embedding's) travels as its rows,
//              cut by the parts' row ranges;
//   pull_rows  (an embedding lookup): only the rows a batch reads of a table the step does not
//              pull whole, each id asked of the part that holds it (the parts are consecutive
//              row ranges: embedding_lookup's partition_strategy "div", which is how TF's
//              partitioners cut a variable);
//   stage      (during a step's backward pass): gradients that are ready go ahead to their
//              tasks in frames without a reply; the step's push_pull applies them with its
//              own gradients, still one round trip and one update per ps task;
//   pull_all   (the chief's checkpoints): everything the tasks hold, named as one process
//              names it (parts joined: "emb/part_1/Adagrad" is rows of "emb/Adagrad"), so a
//              checkpoint is the same file every strategy writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "distribute/ps/ps_client.h"
#include "distribute/ps/ps_placement.h"
#include "nn/optimizer.h"
#include "nn/variable_store.h"

namespace est::distribute {

class PsVariables {
 public:
  // Both must outlive this object.
  PsVariables(PsClient& client, PsPlacement& placement);

  // Places `names` (variables of `store`, in creation order) not placed yet.
  void place(const nn::VariableStore& store, const std::vector<std::string>& names);
  const PsVariable& place(const std::string& name, const ops::Tensor& value);
  // The chief: `values` (placed variables, their slots, other optimizer state) to their tasks.
  void initialize(const std::vector<NamedTensor>& values);
  // Waits (at most `timeout`, DeadlineExceededError naming the task) until every task is
  // initialized, then writes the placed variables' values into `store`. The global step.
  int64_t pull(nn::VariableStore& store, std::chrono::milliseconds timeout);
  // The owners' value of placed variable `name` (parts joined), waiting (at most `timeout`)
  // until the chief has initialized it.
  ops::Tensor pull_variable(const std::string& name, std::chrono::milliseconds timeout);
  // One step: pushes `grads` (of placed variables: dense, or row-sparse in sparse_gradient;
  // neither: skipped) and `moving_averages` (of placed variables: their owners apply them after
  // the gradients) and writes the fresh values of every placed variable but those in
  // `not_pulled` (tables read by rows only: pull_rows brings what a step reads) into `store`.
  // `global_step_seen`: the step the gradients were computed at. Returns the global step after
  // the update.
  int64_t push_pull(const std::vector<nn::GradAndVar>& grads, nn::VariableStore& store,
                    int64_t global_step_seen,
                    const std::vector<PsMovingAverage>& moving_averages = {},
                    const std::set<std::string>& not_pulled = {});
  // Adds to `requests` (one per ps task, all set) the names of every placed variable's parts
  // but global_step and those of `not_pulled`, so that their replies carry the values.
  void add_pulls(std::vector<std::optional<PsRequest>>& requests,
                 const std::set<std::string>& not_pulled) const;
  // Writes the values `replies` (to add_pulls' requests) carry into `store`, parts joined, and
  // the global step when one of them holds it; returns it (-1: none did).
  int64_t write_pulled(const std::vector<std::optional<PsReply>>& replies, nn::VariableStore& store,
                       const std::set<std::string>& not_pulled) const;
  // Sends `grads` (of placed variables, dense, already scaled) ahead of the step's push_pull,
  // which applies them with its own (a variable's gradient goes in one of the two, once).
  void stage(const std::vector<nn::GradAndVar>& grads);
  // The step that staged gradients failed before its push_pull: the tasks drop them (best
  // effort: a task that cannot be reached has dropped them with its connection).
  void discard_staged() noexcept;
  // The owners' rows `ids` (integer, any shape; negative ids skipped, repeats pulled once) of
  // placed variable `name`, written into those rows of `into` (the worker's copy, of the
  // variable's shape). An id past the variable's rows is an InvalidArgumentError naming both.
  // Waits (at most `wait_for_chief`) until the chief has initialized the variable.
  void pull_rows(const std::string& name, const ops::Tensor& ids, ops::Tensor& into,
                 std::chrono::milliseconds wait_for_chief = {});
  // The distinct rows `ids` names of placed variable `name`, ascending, negative ids skipped;
  // one past the variable's rows is an InvalidArgumentError naming the variable and the id.
  std::set<int64_t> rows_read(const std::string& name, const ops::Tensor& ids) const;
  // Everything the tasks hold, with one process's names, parts joined.
  std::vector<NamedTensor> pull_all();
  // Adds `grads` (of placed variables: dense, or row-sparse in sparse_gradient, sent as its
  // rows; neither: skipped) to `requests` ([ps tasks], each set already), each gradient cut
  // into its parts' rows for the tasks that hold them, and sets `kind` on every request that
  // got one.
  void add_gradients(const std::vector<nn::GradAndVar>& grads,
                     std::vector<std::optional<PsRequest>>& requests, PsRequestKind kind) const;
  // Adds `moving_averages` (of placed variables) to `requests` the same way.
  void add_moving_averages(const std::vector<PsMovingAverage>& moving_averages,
                           std::vector<std::optional<PsRequest>>& requests,
                           PsRequestKind kind) const;

  // This training task is done (the chief: the job ends once the other training tasks are
  // done or gone, and the ps tasks exit).
  void finish(const std::string& task, bool chief);
  // Tells every reachable task that the job failed (never throws).
  void abort(const std::string& message) noexcept;

  PsClient& client() { return *client_; }
  const PsPlacement& placement() const { return *placement_; }

 private:
  // The placed variable `name` is `variable` or a slot of it ("dense/kernel/Momentum"): the
  // variable, and the slot's suffix ("/Momentum", or "" for the variable itself).
  const PsVariable* owner(const std::string& name, std::string* suffix) const;
  // client_->exchange(requests, what), again every 100 ms while a task answers that it does not
  // hold variable `name` yet; DeadlineExceededError naming it after `timeout`.
  std::vector<std::optional<PsReply>> exchange_once_initialized(
      const std::vector<std::optional<PsRequest>>& requests, const std::string& name,
      const std::string& what, std::chrono::milliseconds timeout);

  PsClient* client_;
  PsPlacement* placement_;
  std::vector<bool> staged_;  // [ps tasks]: holds gradients staged for the next push_pull
};

}  // namespace est::distribute
