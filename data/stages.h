// Constructors of the pipeline's stages, one group per .cpp file; Dataset's methods and the
// readers call them after validating their arguments. Below each group, the interface that a
// pipeline rewrite (auto_shard.cpp) finds on those stages with dynamic_cast.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/node.h"
#include "data/options.h"

namespace est::data {

// sources.cpp. `load` is called on the first iterator, and returns an element whose tensors all
// share their first dimension; the stage yields its rows. `what` names the source in messages.
// `reloadable` (a file source): release_reloadable() frees the loaded tensors, and the next
// iterator calls `load` again.
NodePtr make_slices_node(std::function<Element()> load, std::string what, bool reloadable = false);
// Rows that arrive over time: a source whose file is decoded in the background while its first
// rows are already read. wait_for(rows) blocks until the first `rows` rows of the loaded
// tensors hold their values (all of them: until the whole file is decoded and checked) and
// returns how many rows are there now; it rethrows the error that stopped the decoding once a
// row it did not reach is asked for.
class ArrivingRows {
 public:
  virtual ~ArrivingRows() = default;
  virtual int64_t wait_for(int64_t rows) const = 0;
};
struct LoadedColumns {
  Element columns;                               // full-size tensors, filled as rows arrive
  std::shared_ptr<const ArrivingRows> arriving;  // null: every row is there already
};
// make_slices_node over columns that fill in the background: an iterator never moves past a
// row that has not arrived (next, skip, restore wait for it), so the stages after it (shuffle's
// buffer of row numbers, batch's copies from the columns) only see rows that are there.
NodePtr make_arriving_slices_node(std::function<LoadedColumns()> load, std::string what,
                                  bool reloadable);
// `what`: "from_tensors" or "from_strings", for messages.
NodePtr make_elements_node(std::vector<Element> elements, std::string what = "from_tensors");
NodePtr make_range_node(int64_t start, int64_t stop, int64_t step);
NodePtr make_generator_node(GeneratorFactory factory);

// A source reading files one after another (TFRecord, CSV readers). The per-file reader saves
// and restores its position inside the file; the stage adds which file it is in.
class FileReader {
 public:
  virtual ~FileReader() = default;
  virtual std::optional<Element> next() = 0;
  virtual void save(StateWriter& writer) = 0;
  virtual void restore(StateReader& reader) = 0;
};
using OpenFileFn = std::function<std::unique_ptr<FileReader>(const std::string& path)>;
// `stage` tags its iterator state ("tfrecord"); `what` names it in messages ("tfrecord_dataset").
NodePtr make_file_source_node(std::vector<std::string> paths, OpenFileFn open, std::string stage,
                              std::string what);

// A source reading a list of files (TF's reader datasets): FILE sharding gives each worker a
// part of the list.
class FileListStage : public DatasetNode {
 public:
  virtual const std::vector<std::string>& paths() const = 0;
  // The same reader over `paths`.
  virtual NodePtr with_paths(std::vector<std::string> paths) const = 0;
};

// A fixed list of elements (from_tensors, from_strings): its elements can be counted.
class ElementListStage : public DatasetNode {
 public:
  virtual int64_t size() const = 0;
};

// transforms.cpp
NodePtr make_map_node(NodePtr input, MapFn fn, int64_t num_parallel_calls);
NodePtr make_filter_node(NodePtr input, PredicateFn predicate);
NodePtr make_take_node(NodePtr input, int64_t count);
NodePtr make_skip_node(NodePtr input, int64_t count);
NodePtr make_shard_node(NodePtr input, int64_t num_shards, int64_t index);
NodePtr make_repeat_node(NodePtr input, int64_t count);

// shard(num_shards, index); num_shards may be kShardHint (options.h), which HINT replaces.
class ShardStage : public DatasetNode {
 public:
  virtual int64_t num_shards() const = 0;
  virtual int64_t index() const = 0;
};

// options.cpp. with_options: passes its input through unchanged (its iterator is the input's).
NodePtr make_options_node(NodePtr input, Options options);
class OptionsStage : public DatasetNode {
 public:
  virtual const Options& options() const = 0;
};

// shuffle.cpp
NodePtr make_shuffle_node(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed,
                          bool reshuffle_each_iteration);

// batch.cpp
struct BatchConfig {
  enum class Kind { kDense, kPadded, kRagged } kind = Kind::kDense;
  int64_t batch_size = 1;
  bool drop_remainder = false;
  PaddedShapes padded_shapes;
  PaddingValues padding_values;
  std::vector<std::string> ragged_features;
};
NodePtr make_batch_node(NodePtr input, BatchConfig config);
class BatchStage : public DatasetNode {
 public:
  virtual const BatchConfig& config() const = 0;
  // The same stage making batches of `batch_size`.
  virtual NodePtr with_batch_size(int64_t batch_size) const = 0;
};

// cache.cpp
NodePtr make_memory_cache_node(NodePtr input);
NodePtr make_file_cache_node(NodePtr input, std::string path);

// prefetch.cpp. The iterator form wraps an existing iterator (interleave's parallel reads); its
// consumer is woken once the queue is half full rather than per element.
NodePtr make_prefetch_node(NodePtr input, int64_t buffer_size);
std::unique_ptr<IteratorBase> make_prefetch_iterator(std::unique_ptr<IteratorBase> input,
                                                     int64_t buffer_size);

// interleave.cpp
NodePtr make_interleave_node(NodePtr input, InterleaveFn fn, int64_t cycle_length,
                             int64_t block_length, int64_t num_parallel_calls);
class InterleaveStage : public DatasetNode {
 public:
  // What maps each input element to the dataset it reads.
  virtual const InterleaveFn& fn() const = 0;
};

// The number of worker threads kAutotune stands for (the machine's cores, at least 1).
int64_t autotune_parallelism();

}  // namespace est::data
