// update_rows: gather the rows, run the dense update on them, scatter them back.
#include "nn/row_update.h"

#include "ops/array_ops.h"

namespace est::nn::optim {

void update_rows(const std::vector<GradAndVar>& grads,
                 const std::vector<std::vector<Tensor>>& slots, const DenseUpdate& update) {
  std::vector<GradAndVar> views;
  std::vector<std::vector<Tensor>> view_slots(slots.size());
  std::vector<size_t> sparse;  // entries of `grads` whose views are rows
  std::vector<size_t> view_of(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const GradAndVar& entry = grads[i];
    if (!entry.sparse_gradient.defined()) {
      view_of[i] = views.size();
      views.push_back(entry);
      for (size_t s = 0; s < slots.size(); ++s) view_slots[s].push_back(slots[s][i]);
      continue;
    }
    const ops::IndexedSlices& rows = entry.sparse_gradient;
    if (rows.num_rows() == 0) continue;
    view_of[i] = views.size();
    sparse.push_back(i);
    GradAndVar view{entry.name, rows.values, ops::gather(entry.variable, rows.indices)};
    views.push_back(std::move(view));
    for (size_t s = 0; s < slots.size(); ++s)
      view_slots[s].push_back(ops::gather(slots[s][i], rows.indices));
  }
  if (views.empty()) return;
  update(views, view_slots);
  for (size_t i : sparse) {
    const Tensor& indices = grads[i].sparse_gradient.indices;
    Tensor variable = grads[i].variable;
    ops::scatter_rows(variable, indices, views[view_of[i]].variable);
    for (size_t s = 0; s < slots.size(); ++s) {
      Tensor slot = slots[s][i];
      ops::scatter_rows(slot, indices, view_slots[s][view_of[i]]);
    }
  }
}

}  // namespace est::nn::optim
