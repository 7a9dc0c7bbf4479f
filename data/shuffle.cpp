// shuffle(buffer_size, seed, reshuffle_each_iteration): a buffer of elements, one drawn
// uniformly at a time and replaced by the next input element, as tf.data does.
//
// The generator is seeded from (seed, epoch key) when reshuffle_each_iteration is set, so each
// pass of repeat() gets a new order that is still a pure function of the seed; without a seed a
// random one is drawn per iterator and stored in its state. Saving stores the generator words
// and the buffered elements, which makes resume exact.
#include <random>

#include "data/stages.h"
#include "ops/random.h"

namespace est::data {
namespace {

class ShuffleIterator final : public IteratorBase {
 public:
  ShuffleIterator(std::unique_ptr<IteratorBase> input, int64_t buffer_size, uint64_t seed)
      : input_(std::move(input)), buffer_size_(buffer_size), generator_(seed) {
    buffer_.reserve(static_cast<size_t>(std::min<int64_t>(buffer_size_, 1 << 16)));
  }

  std::optional<Element> next() override {
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
      std::optional<Element> element = input_->next();
      if (!element) {
        input_done_ = true;
        break;
      }
      buffer_.push_back(std::move(*element));
    }
    if (buffer_.empty()) return std::nullopt;
    size_t pick = static_cast<size_t>(generator_.next_u64() % buffer_.size());
    if (pick != buffer_.size() - 1) std::swap(buffer_[pick], buffer_.back());
    Element out = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("shuffle");
    for (uint64_t word : generator_.state()) writer.write_u64(word);
    writer.write_bool(input_done_);
    writer.write_u64(buffer_.size());
    for (const Element& element : buffer_) writer.write_element(element);
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("shuffle");
    std::array<uint64_t, 4> state;
    for (uint64_t& word : state) word = reader.read_u64();
    generator_.set_state(state);
    input_done_ = reader.read_bool();
    uint64_t count = reader.read_u64();
    if (count > static_cast<uint64_t>(buffer_size_))
      throw InvalidArgumentError(
          "iterator state does not match this pipeline: " + std::to_string(count) +
          " elements saved for a shuffle buffer of " + std::to_string(buffer_size_));
    buffer_.clear();
    for (uint64_t i = 0; i < count; ++i) buffer_.push_back(reader.read_element());
    input_->restore(reader);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  int64_t buffer_size_;
  ops::Generator generator_;
  bool input_done_ = false;
  std::vector<Element> buffer_;
};

class ShuffleNode final : public DatasetNode {
 public:
  ShuffleNode(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle)
      : input_(std::move(input)),
        buffer_size_(buffer_size),
        seed_(seed),
        reshuffle_(reshuffle),
        unseeded_once_(random_seed()) {}

  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    uint64_t seed;
    if (seed_)
      seed = reshuffle_ ? mix_seed(*seed_, context.epoch_key) : *seed_;
    else  // no seed: a new order per iterator, or one order for this dataset's lifetime
      seed = reshuffle_ ? random_seed() : unseeded_once_;
    return std::make_unique<ShuffleIterator>(input_->make_iterator(context), buffer_size_, seed);
  }

 private:
  NodePtr input_;
  int64_t buffer_size_;
  std::optional<uint64_t> seed_;
  bool reshuffle_;
  uint64_t unseeded_once_;

  static uint64_t random_seed() {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }
};

}  // namespace

NodePtr make_shuffle_node(NodePtr input, int64_t buffer_size, std::optional<uint64_t> seed,
                          bool reshuffle_each_iteration) {
  return std::make_shared<ShuffleNode>(std::move(input), buffer_size, seed,
                                       reshuffle_each_iteration);
}

}  // namespace est::data
