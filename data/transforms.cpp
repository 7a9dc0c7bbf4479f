// Element-wise stages: map (sequential or on a thread pool, order kept), filter, take, skip,
// shard and repeat.
#include <algorithm>
#include <deque>
#include <future>
#include <type_traits>

#include "data/stages.h"
#include "data/thread_pool.h"

namespace est::data {
namespace {

// An iterator over one input whose state is its stage's name, its own fields (save_fields,
// restore_fields) and then the input's state.
class OneInputIterator : public IteratorBase {
 public:
  void save(StateWriter& writer) final {
    writer.begin_stage(stage_);
    save_fields(writer);
    input_->save(writer);
  }

  void restore(StateReader& reader) final {
    reader.expect_stage(stage_);
    restore_fields(reader);
    input_->restore(reader);
  }

 protected:
  OneInputIterator(std::unique_ptr<IteratorBase> input, const char* stage)
      : input_(std::move(input)), stage_(stage) {}
  virtual void save_fields(StateWriter&) {}
  virtual void restore_fields(StateReader&) {}

  std::unique_ptr<IteratorBase> input_;

 private:
  const char* stage_;
};

// --- map ---

class MapIterator final : public OneInputIterator {
 public:
  MapIterator(std::unique_ptr<IteratorBase> input, const MapFn& fn)
      : OneInputIterator(std::move(input), "map"), fn_(fn) {}

  std::optional<Element> next() override {
    std::optional<Element> element = input_->next();
    if (!element) return std::nullopt;
    return fn_(std::move(*element));
  }

 private:
  const MapFn& fn_;  // owned by the node, which the Dataset keeps alive
};

// Keeps up to `window_` calls in flight on the pool and hands results back in input order.
// Work is handed out in blocks of consecutive elements, refilled half a window at a time, so
// cheap functions do not pay a thread handoff per element: a refill is one block per thread
// (each submission wakes a worker, which on a machine with few cores means a context switch).
// Saving waits for the calls in flight and stores their results, so nothing is recomputed or
// lost on restore.
class ParallelMapIterator final : public IteratorBase {
 public:
  ParallelMapIterator(std::unique_ptr<IteratorBase> input, std::shared_ptr<const MapFn> fn,
                      int64_t threads)
      : input_(std::move(input)),
        fn_(std::move(fn)),
        window_(32 * threads),
        block_(16),
        pool_(threads) {}

  ~ParallelMapIterator() override {
    for (auto& result : pending_) result.wait();  // tasks reference fn_ and this stage
  }

  std::optional<Element> next() override {
    if (static_cast<int64_t>(pending_.size()) <= window_ / 2) fill();
    if (pending_.empty()) return std::nullopt;
    std::shared_future<Element> result = std::move(pending_.front());
    pending_.pop_front();
    return result.get();  // rethrows the map function's exception at this element's position
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("parallel_map");
    writer.write_bool(input_done_);
    writer.write_u64(pending_.size());
    for (auto& result : pending_) {
      std::exception_ptr error;
      Element element;
      try {
        element = result.get();
      } catch (...) {
        error = std::current_exception();
      }
      write_error(writer, error);
      if (!error) writer.write_element(element);
    }
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("parallel_map");
    for (auto& result : pending_) result.wait();
    pending_.clear();
    input_done_ = reader.read_bool();
    uint64_t count = reader.read_u64();
    for (uint64_t i = 0; i < count; ++i) {
      std::promise<Element> promise;
      if (std::exception_ptr error = read_error(reader))
        promise.set_exception(error);
      else
        promise.set_value(reader.read_element());
      pending_.push_back(promise.get_future().share());
    }
    input_->restore(reader);
  }

 private:
  struct Call {
    Element input;
    std::promise<Element> result;
  };
  using Block = std::vector<Call>;

  void submit(std::shared_ptr<Block> block) {
    pool_.submit([fn = fn_, block] {
      for (Call& call : *block) {
        try {
          call.result.set_value((*fn)(std::move(call.input)));
        } catch (...) {
          call.result.set_exception(std::current_exception());
        }
      }
    });
  }

  void fill() {
    auto block = std::make_shared<Block>();
    while (!input_done_ && static_cast<int64_t>(pending_.size()) < window_) {
      std::optional<Element> element = input_->next();
      if (!element) {
        input_done_ = true;
        break;
      }
      block->push_back(Call{std::move(*element), {}});
      pending_.push_back(block->back().result.get_future().share());
      if (static_cast<int64_t>(block->size()) == block_) {
        submit(std::move(block));
        block = std::make_shared<Block>();
      }
    }
    if (!block->empty()) submit(std::move(block));
  }

  std::unique_ptr<IteratorBase> input_;
  std::shared_ptr<const MapFn> fn_;
  int64_t window_, block_;
  bool input_done_ = false;
  std::deque<std::shared_future<Element>> pending_;
  ThreadPool pool_;  // last: destroyed (joined) first
};

class MapNode final : public DatasetNode {
 public:
  MapNode(NodePtr input, MapFn fn, int64_t num_parallel_calls)
      : input_(std::move(input)),
        fn_(std::make_shared<const MapFn>(std::move(fn))),
        threads_(num_parallel_calls == kAutotune ? autotune_parallelism() : num_parallel_calls) {}

  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    auto input = input_->make_iterator(context);
    if (threads_ <= 1) return std::make_unique<MapIterator>(std::move(input), *fn_);
    return std::make_unique<ParallelMapIterator>(std::move(input), fn_, threads_);
  }
  std::string name() const override { return "map"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    auto copy = std::make_shared<MapNode>(*this);
    copy->input_ = std::move(input);
    return copy;
  }

 private:
  NodePtr input_;
  std::shared_ptr<const MapFn> fn_;
  int64_t threads_;
};

// --- filter ---

class FilterIterator final : public OneInputIterator {
 public:
  FilterIterator(std::unique_ptr<IteratorBase> input, const PredicateFn& predicate)
      : OneInputIterator(std::move(input), "filter"), predicate_(predicate) {}

  std::optional<Element> next() override {
    while (std::optional<Element> element = input_->next())
      if (predicate_(*element)) return element;
    return std::nullopt;
  }

 private:
  const PredicateFn& predicate_;
};

class FilterNode final : public DatasetNode {
 public:
  FilterNode(NodePtr input, PredicateFn predicate)
      : input_(std::move(input)), predicate_(std::move(predicate)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<FilterIterator>(input_->make_iterator(context), predicate_);
  }
  std::string name() const override { return "filter"; }
  NodePtr input() const override { return input_; }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<FilterNode>(std::move(input), predicate_);
  }

 private:
  NodePtr input_;
  PredicateFn predicate_;
};

// --- take, skip, shard: counters over the input ---

class TakeIterator final : public OneInputIterator {
 public:
  TakeIterator(std::unique_ptr<IteratorBase> input, int64_t count)
      : OneInputIterator(std::move(input), "take"), count_(count) {}

  std::optional<Element> next() override {
    if (count_ >= 0 && taken_ >= count_) return std::nullopt;
    std::optional<Element> element = input_->next();
    if (element) ++taken_;
    return element;
  }

  void save_fields(StateWriter& writer) override { writer.write_i64(taken_); }

  void restore_fields(StateReader& reader) override { taken_ = reader.read_i64(); }

 private:
  int64_t count_;
  int64_t taken_ = 0;
};

class SkipIterator final : public OneInputIterator {
 public:
  SkipIterator(std::unique_ptr<IteratorBase> input, int64_t count)
      : OneInputIterator(std::move(input), "skip"), count_(count) {}

  std::optional<Element> next() override {
    if (!skipped_) {
      skipped_ = true;
      if (count_ < 0) {
        while (input_->skip(1 << 20) > 0) {
        }
        return std::nullopt;
      }
      input_->skip(count_);
    }
    return input_->next();
  }

  void save_fields(StateWriter& writer) override { writer.write_bool(skipped_); }

  void restore_fields(StateReader& reader) override { skipped_ = reader.read_bool(); }

 private:
  int64_t count_;
  bool skipped_ = false;
};

// Element i goes to shard i % num_shards: shards are disjoint and cover the input once.
class ShardIterator final : public OneInputIterator {
 public:
  ShardIterator(std::unique_ptr<IteratorBase> input, int64_t num_shards, int64_t index)
      : OneInputIterator(std::move(input), "shard"), num_shards_(num_shards), index_(index) {}

  std::optional<Element> next() override {
    // Skip to this shard's next element: first to `index_` at the start, then num_shards - 1.
    int64_t gap = started_ ? num_shards_ - 1 : index_;
    started_ = true;
    if (input_->skip(gap) < gap) return std::nullopt;
    return input_->next();
  }

  void save_fields(StateWriter& writer) override { writer.write_bool(started_); }

  void restore_fields(StateReader& reader) override { started_ = reader.read_bool(); }

 private:
  int64_t num_shards_, index_;
  bool started_ = false;
};

// take or skip.
template <class Stage>
class CountNode final : public DatasetNode {
 public:
  CountNode(NodePtr input, int64_t count, std::string name)
      : input_(std::move(input)), count_(count), name_(std::move(name)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<Stage>(input_->make_iterator(context), count_);
  }
  std::string name() const override { return name_; }
  NodePtr input() const override { return input_; }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<CountNode>(std::move(input), count_, name_);
  }
  int64_t count() const { return count_; }
  int64_t cardinality() const override;

 private:
  NodePtr input_;
  int64_t count_;
  std::string name_;
};

class ShardNode final : public ShardStage {
 public:
  ShardNode(NodePtr input, int64_t num_shards, int64_t index)
      : input_(std::move(input)), num_shards_(num_shards), index_(index) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    if (num_shards_ == kShardHint)  // TensorFlow's message
      throw FailedPreconditionError(
          "Dataset::shard(kShardHint, ...) can only be used in strategy.distribute_dataset() with "
          "AutoShardPolicy::kHint, which replaces it with shard(num_workers, worker_index)");
    return std::make_unique<ShardIterator>(input_->make_iterator(context), num_shards_, index_);
  }
  std::string name() const override { return "shard"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override {
    int64_t in = input_->cardinality();
    if (in < 0 || num_shards_ == kShardHint) return in < 0 ? in : kUnknownCardinality;
    return in / num_shards_ + (index_ < in % num_shards_ ? 1 : 0);
  }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<ShardNode>(std::move(input), num_shards_, index_);
  }
  int64_t num_shards() const override { return num_shards_; }
  int64_t index() const override { return index_; }

 private:
  NodePtr input_;
  int64_t num_shards_, index_;
};

// --- repeat: a fresh input iterator per pass, each with its own epoch key ---

class RepeatIterator final : public IteratorBase {
 public:
  RepeatIterator(NodePtr input, int64_t count, IteratorContext context)
      : node_(std::move(input)), count_(count), context_(context) {}

  std::optional<Element> next() override {
    while (count_ < 0 || epoch_ < count_) {
      if (!input_) open();
      std::optional<Element> element = input_->next();
      if (element) {
        produced_in_epoch_ = true;
        return element;
      }
      input_.reset();
      ++epoch_;
      // An empty pass would make repeat() spin forever: stop, as tf.data does.
      if (!produced_in_epoch_) {
        count_ = epoch_;
        break;
      }
    }
    return std::nullopt;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("repeat");
    writer.write_i64(epoch_);
    writer.write_i64(count_);
    writer.write_bool(produced_in_epoch_);
    writer.write_bool(input_ != nullptr);
    if (input_) input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("repeat");
    epoch_ = reader.read_i64();
    count_ = reader.read_i64();
    bool produced = reader.read_bool();
    input_.reset();
    if (reader.read_bool()) {
      open();
      input_->restore(reader);
    }
    produced_in_epoch_ = produced;
  }

 private:
  void open() {
    input_ = node_->make_iterator({.epoch_key = mix_seed(context_.epoch_key, epoch_)});
    produced_in_epoch_ = false;
  }

  NodePtr node_;
  int64_t count_;
  IteratorContext context_;
  int64_t epoch_ = 0;
  bool produced_in_epoch_ = false;
  std::unique_ptr<IteratorBase> input_;
};

class RepeatNode final : public DatasetNode {
 public:
  RepeatNode(NodePtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<RepeatIterator>(input_, count_, context);
  }
  std::string name() const override { return "repeat"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override {
    int64_t in = input_->cardinality();
    if (in == 0 || count_ == 0) return 0;
    if (in == kUnknownCardinality) return in;
    if (count_ < 0 || in == kInfiniteCardinality) return kInfiniteCardinality;
    return in * count_;
  }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<RepeatNode>(std::move(input), count_);
  }
  int64_t count() const { return count_; }

 private:
  NodePtr input_;
  int64_t count_;
};

}  // namespace

NodePtr make_map_node(NodePtr input, MapFn fn, int64_t num_parallel_calls) {
  return std::make_shared<MapNode>(std::move(input), std::move(fn), num_parallel_calls);
}

NodePtr make_filter_node(NodePtr input, PredicateFn predicate) {
  return std::make_shared<FilterNode>(std::move(input), std::move(predicate));
}

NodePtr make_take_node(NodePtr input, int64_t count) {
  return std::make_shared<CountNode<TakeIterator>>(std::move(input), count, "take");
}

NodePtr make_skip_node(NodePtr input, int64_t count) {
  return std::make_shared<CountNode<SkipIterator>>(std::move(input), count, "skip");
}

NodePtr make_shard_node(NodePtr input, int64_t num_shards, int64_t index) {
  return std::make_shared<ShardNode>(std::move(input), num_shards, index);
}

NodePtr make_repeat_node(NodePtr input, int64_t count) {
  return std::make_shared<RepeatNode>(std::move(input), count);
}

template <class Stage>
int64_t CountNode<Stage>::cardinality() const {
  int64_t in = input_->cardinality();
  if (std::is_same_v<Stage, TakeIterator>) {
    if (count_ < 0) return in;
    if (in == kUnknownCardinality) return in;
    return in == kInfiniteCardinality ? count_ : std::min(in, count_);
  }
  if (in < 0) return in;
  return count_ < 0 ? 0 : std::max<int64_t>(0, in - count_);
}

int64_t cardinality(const Dataset& dataset) { return dataset.node()->cardinality(); }

bool is_infinite(const Dataset& dataset) {
  // From the last stage back: a take(n >= 0) ends the input whatever comes before it; a
  // repeat() forever over a non-empty input never ends. Other stages keep what their input does
  // (filter() and interleave() included: a conservative answer for them).
  for (const DatasetNode* node = dataset.node().get(); node; node = node->input().get()) {
    if (const auto* take = dynamic_cast<const CountNode<TakeIterator>*>(node))
      if (take->count() >= 0) return false;
    if (const auto* repeat = dynamic_cast<const RepeatNode*>(node)) {
      if (repeat->count() < 0) return true;
    }
  }
  return false;
}

}  // namespace est::data
