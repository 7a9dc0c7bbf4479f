// Constructors of the pipeline's stages, one group per .cpp file; Dataset's methods and the
// readers call them after validating their arguments.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/node.h"

namespace est::data {

// sources.cpp. `load` is called once, on the first iterator, and returns an element whose
// tensors all share their first dimension; the stage yields its rows. `what` names the source
// in messages.
NodePtr make_slices_node(std::function<Element()> load, std::string what);
NodePtr make_elements_node(std::vector<Element> elements);
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
NodePtr make_file_source_node(std::vector<std::string> paths, OpenFileFn open, std::string stage);

// transforms.cpp
NodePtr make_map_node(NodePtr input, MapFn fn, int64_t num_parallel_calls);
NodePtr make_filter_node(NodePtr input, PredicateFn predicate);
NodePtr make_take_node(NodePtr input, int64_t count);
NodePtr make_skip_node(NodePtr input, int64_t count);
NodePtr make_shard_node(NodePtr input, int64_t num_shards, int64_t index);
NodePtr make_repeat_node(NodePtr input, int64_t count);

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

// The number of worker threads kAutotune stands for (the machine's cores, at least 1).
int64_t autotune_parallelism();

}  // namespace est::data
