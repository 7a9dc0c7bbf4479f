// Dataset: a lazy, composable input pipeline, as tf.data.Dataset.
//
// A Dataset is a value (one shared_ptr to an immutable description), so methods return new
// datasets and copying one is free. Nothing is read until iterator() is called; an Iterator
// yields elements one at a time, reports the end of input by returning nullopt, and can save
// its position as bytes and restore it later for an exact resume after a restart.
//
//   auto ds = est::data::fashion_mnist("train");
//   ds = ds.map(est::data::scale).cache().shuffle(10000, 42).batch(64).prefetch(2);
//   for (auto it = ds.iterator(); auto element = it.next();) { ... }
//
// Exact resume: every stage resumes exactly; the state of source -> map -> shuffle(seed) ->
// batch -> repeat, with filter/take/skip/shard/prefetch/interleave anywhere, holds counters,
// RNG words and whatever elements are buffered (a shuffle over a cache() or tensor slices
// buffers row numbers, 8 bytes each; a shuffle over anything else stores its buffered elements,
// ~31 MB for 10000 float32 Fashion-MNIST images). Two stages replay instead of storing, which
// is exact only when their input is deterministic: from_generator calls the factory again and
// discards the elements already produced; a memory cache() that this process has not filled yet
// is refilled by reading its input from the start (so an unseeded shuffle() or a
// non-deterministic map before a cache breaks exactness). A file cache(path) and the readers
// store the file and byte offset. Unseeded shuffles resume exactly too: their seed is in the
// state.
//
// Fast paths: tensor slices and a filled memory cache keep rows column-wise; shuffle permutes
// row numbers and batch copies rows straight into the batch, so a cached epoch of
// cache().shuffle().batch() costs about one memcpy per example.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/element.h"
#include "data/options.h"

namespace est::data {

class DatasetNode;
class IteratorBase;
class Dataset;

// Lets the pipeline choose: the number of cores for parallelism, 2 for prefetch buffers.
inline constexpr int64_t kAutotune = -1;

using MapFn = std::function<Element(Element)>;
using PredicateFn = std::function<bool(const Element&)>;
using GeneratorFn = std::function<std::optional<Element>()>;  // nullopt ends the input
using GeneratorFactory = std::function<GeneratorFn()>;        // called once per pass
using InterleaveFn = std::function<Dataset(const Element&)>;
// padded_batch: target shape per component name (see element.h); -1 pads to the batch's longest.
using PaddedShapes = std::map<std::string, Shape>;
using PaddingValues = std::map<std::string, double>;  // default 0

// One consumer at a time: an Iterator is not thread-safe (its stages may run their own threads).
// A Dataset is immutable and may be shared between threads and iterators freely.
class Iterator {
 public:
  // `pipeline` is kept alive for as long as the iterator: stages refer to their node's state.
  Iterator(std::unique_ptr<IteratorBase> impl, std::shared_ptr<const DatasetNode> pipeline);
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  // The next element, or nullopt once the input is exhausted. Errors in the data (corrupt
  // files, failing map functions) are thrown as est::Error from here.
  std::optional<Element> next();
  // Gives back elements next() returned that were not used (a training step that did not run):
  // the next calls of next() return them again, the first of `elements` first, before the
  // input's own, and save_state() keeps them, so the saved position is the one before them.
  void put_back(std::vector<Element> elements);
  // The position as bytes, for the checkpoint; restore_state() on an iterator of the same
  // pipeline continues with exactly the elements this one would have produced.
  std::string save_state();
  void restore_state(std::string_view state);

 private:
  std::shared_ptr<const DatasetNode> pipeline_;
  std::unique_ptr<IteratorBase> impl_;  // after pipeline_: destroyed first
  std::vector<Element> put_back_;       // given back, the next one last
};

class Dataset {
 public:
  explicit Dataset(std::shared_ptr<const DatasetNode> node);

  // --- Sources ---
  // Slices along the first dimension; all tensors must agree on it.
  static Dataset from_tensor_slices(const Tensor& tensor);
  static Dataset from_tensor_slices(const Features& features, const Tensor& labels = {});
  // A dataset of one element.
  static Dataset from_tensors(const Element& element);
  // int64 scalars start, start + step, ... up to (excluding) stop.
  static Dataset range(int64_t stop) { return range(0, stop, 1); }
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  // Elements from a C++ callable; `factory` is called at the start of every pass (repeat) and
  // returns the callable that yields that pass's elements.
  static Dataset from_generator(GeneratorFactory factory);
  // Strings (file names, typically) as uint8 [length] tensors; tensor_bytes() reads them back.
  static Dataset from_strings(std::vector<std::string> strings);

  // --- Transformations ---
  // num_parallel_calls > 1 (or kAutotune) runs `fn` on a thread pool; output order is kept.
  Dataset map(MapFn fn, int64_t num_parallel_calls = 1) const;
  Dataset filter(PredicateFn predicate) const;
  // Without a seed the order differs from run to run. With reshuffle_each_iteration, every pass
  // of repeat() draws a new order (still a function of the seed).
  Dataset shuffle(int64_t buffer_size, std::optional<uint64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  // Stacks `batch_size` elements along a new first dimension; shapes must agree.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // Like batch, padding each component to `padded_shapes` (default: the batch's longest).
  Dataset padded_batch(int64_t batch_size, PaddedShapes padded_shapes = {},
                       PaddingValues padding_values = {}, bool drop_remainder = false) const;
  // Like batch, but the named variable-length features become ragged: `name` holds their
  // values concatenated along the first dimension and `name/row_splits` (int64 [batch + 1])
  // where each element's rows start and end.
  Dataset ragged_batch(int64_t batch_size, std::vector<std::string> ragged_features,
                       bool drop_remainder = false) const;
  Dataset repeat(int64_t count = -1) const;      // -1: forever
  Dataset cache() const;                         // in memory, filled by the first complete pass
  Dataset cache(const std::string& path) const;  // in a file, reused across runs
  // Element i goes to shard i % num_shards. shard(kShardHint, ...) is a placeholder that
  // distribute_dataset under AutoShardPolicy::kHint replaces with (num_workers, worker_index).
  Dataset shard(int64_t num_shards, int64_t index) const;
  Dataset take(int64_t count) const;  // -1: everything
  Dataset skip(int64_t count) const;  // -1: everything
  // A background thread fills a bounded queue of `buffer_size` elements ahead of the consumer.
  Dataset prefetch(int64_t buffer_size = kAutotune) const;
  // tf.data.experimental.prefetch_to_device: the last transformation of a pipeline; its
  // elements come out with their tensors on `device` ("/gpu:0"), copied from pinned buffers on
  // the device's copy stream while the previous step runs (kAutotune: 2 elements). On a CPU
  // device it is prefetch(buffer_size). See data/prefetch_to_device.cpp.
  Dataset prefetch_to_device(ops::Device device, int64_t buffer_size = kAutotune) const;
  Dataset prefetch_to_device(const std::string& device, int64_t buffer_size = kAutotune) const;
  // Maps each input element to a dataset (a file, typically) and mixes `cycle_length` of them,
  // `block_length` elements from each in turn. num_parallel_calls > 1 (or kAutotune) reads the
  // open datasets on background threads; the order is the same either way.
  Dataset interleave(InterleaveFn fn, int64_t cycle_length = kAutotune, int64_t block_length = 1,
                     int64_t num_parallel_calls = 1) const;

  // The same dataset with `options` (tf.data's with_options); options set by an earlier
  // with_options stay unless `options` sets them too. options() merges them over the pipeline.
  Dataset with_options(Options options) const;
  Options options() const;

  Iterator iterator() const;
  const std::shared_ptr<const DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<const DatasetNode> node_;
};

// Whether the pipeline never ends (tf.data's INFINITE_CARDINALITY): a repeat() forever with no
// take(n) after it. Keras's fit refuses such a dataset without steps_per_epoch.
bool is_infinite(const Dataset& dataset);

}  // namespace est::data
