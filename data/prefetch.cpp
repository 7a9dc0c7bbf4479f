// prefetch(n): a background thread runs the input and keeps up to n elements in a bounded
// queue, so the consumer (the training step) finds its next batch ready.
//
// The thread starts on the first next() and stops when the iterator is destroyed or its state
// is saved or restored. Saving stops the thread between two elements and stores the queued
// elements and the input's position, so nothing is lost or read twice. An exception in the input
// is queued like an element and rethrown by next() in order; the iterator ends after it.
#include <algorithm>

#include "data/prefetch_queue.h"
#include "data/stages.h"

namespace est::data {
namespace {

class PrefetchIterator final : public IteratorBase {
 public:
  // `batched_wakeups`: a consumer that finds the queue empty sleeps until it is half full (or
  // the input ends) instead of being woken for each element; for internal queues whose
  // consumer is itself a producer (interleave's parallel reads), not for prefetch(n), whose
  // consumer wants its first batch as soon as there is one. The producer sleeps until the queue
  // is half empty, then refills it in one burst.
  PrefetchIterator(std::unique_ptr<IteratorBase> input, int64_t capacity, bool batched_wakeups)
      : input_(std::move(input)),
        queue_([this] { return input_->next(); }, capacity_of(capacity), capacity_of(capacity) / 2,
               batched_wakeups ? capacity_of(capacity) - capacity_of(capacity) / 2 : 1) {}

  ~PrefetchIterator() override { queue_.stop(); }

  std::optional<Element> next() override { return queue_.pop(); }

  void save(StateWriter& writer) override {
    queue_.stop();
    writer.begin_stage("prefetch");
    writer.write_bool(queue_.finished());
    write_error(writer, queue_.error());
    writer.write_u64(queue_.items().size());
    for (const Element& element : queue_.items()) writer.write_element(element);
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    queue_.stop();
    reader.expect_stage("prefetch");
    const bool finished = reader.read_bool();
    queue_.set_state(finished, read_error(reader));
    uint64_t count = reader.read_u64();
    queue_.items().clear();
    for (uint64_t i = 0; i < count; ++i) queue_.items().push_back(reader.read_element());
    input_->restore(reader);
  }

 private:
  static size_t capacity_of(int64_t capacity) {
    return static_cast<size_t>(std::max<int64_t>(capacity, 1));
  }

  std::unique_ptr<IteratorBase> input_;
  PrefetchQueue<Element> queue_;
};

class PrefetchNode final : public DatasetNode {
 public:
  PrefetchNode(NodePtr input, int64_t buffer_size)
      : input_(std::move(input)), buffer_size_(buffer_size) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<PrefetchIterator>(input_->make_iterator(context), buffer_size_,
                                              /*batched_wakeups=*/false);
  }
  std::string name() const override { return "prefetch"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<PrefetchNode>(std::move(input), buffer_size_);
  }

 private:
  NodePtr input_;
  int64_t buffer_size_;
};

}  // namespace

NodePtr make_prefetch_node(NodePtr input, int64_t buffer_size) {
  return std::make_shared<PrefetchNode>(std::move(input), buffer_size);
}

std::unique_ptr<IteratorBase> make_prefetch_iterator(std::unique_ptr<IteratorBase> input,
                                                     int64_t buffer_size) {
  return std::make_unique<PrefetchIterator>(std::move(input), buffer_size,
                                            /*batched_wakeups=*/true);
}

}  // namespace est::data
