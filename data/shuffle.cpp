// shuffle(buffer_size, seed, reshuffle_each_iteration): a buffer of elements, one drawn
// uniformly at a time and replaced by the next input element, as tf.data does.
//
// The generator is seeded from (seed, epoch key) when reshuffle_each_iteration is set, so each
// pass of repeat() gets a new order that is still a pure function of the seed; without a seed a
// random one is drawn per iterator and stored in its state. Saving stores the generator words
// and the buffered elements, which makes resume exact.
//
// When the input is an indexable store (a cache(), filled or filling, tensor slices), the
// buffer holds row numbers instead of elements: the draws are the same, so is the output, but
// nothing is moved until it is handed out, and a saved state holds row numbers rather than
// serialised elements.
#include <random>

#include "data/progress.h"
#include "data/stages.h"
#include "ops/random.h"

namespace est::data {
namespace {

class ShuffleIterator final : public IteratorBase {
 public:
  ShuffleIterator(std::unique_ptr<IteratorBase> input, int64_t buffer_size, uint64_t seed)
      : input_(std::move(input)), buffer_size_(buffer_size), generator_(seed) {}

  std::optional<Element> next() override {
    if (const RandomAccess* rows = indexed()) return next_row(*rows);
    while (!input_done_ && static_cast<int64_t>(order_.size()) < buffer_size_) {
      std::optional<Element> element = input_->next();
      if (!element) {
        input_done_ = true;
        break;
      }
      store(std::move(*element));
      report_filling(order_.size());
    }
    finish_filling();
    if (order_.empty()) return std::nullopt;
    size_t pick = static_cast<size_t>(generator_.next_u64() % order_.size());
    std::swap(order_[pick], order_.back());
    uint32_t slot = order_.back();
    order_.pop_back();
    free_.push_back(slot);
    prefetch_next_draws();
    return std::move(slots_[slot]);
  }

  // Row numbers pass through when the input is a row store, for batch()'s gather.
  const RowStore* row_store() const override {
    if (mode_ == Mode::kElements) return nullptr;
    return input_->random_access() ? input_->row_store() : nullptr;
  }
  std::optional<int64_t> next_row() override { return draw_row(*indexed()); }

  void save(StateWriter& writer) override {
    writer.begin_stage("shuffle");
    for (uint64_t word : generator_.state()) writer.write_u64(word);
    writer.write_bool(input_done_);
    writer.write_bool(mode_ == Mode::kRows);
    if (mode_ == Mode::kRows) {
      writer.write_u64(rows_.size());
      for (int64_t row : rows_) writer.write_i64(row);
    } else {
      writer.write_u64(order_.size());
      for (uint32_t slot : order_) writer.write_element(slots_[slot]);
    }
    input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("shuffle");
    std::array<uint64_t, 4> state;
    for (uint64_t& word : state) word = reader.read_u64();
    generator_.set_state(state);
    input_done_ = reader.read_bool();
    bool by_rows = reader.read_bool();
    uint64_t count = reader.read_u64();
    if (count > static_cast<uint64_t>(buffer_size_))
      throw InvalidArgumentError(
          "iterator state does not match this pipeline: " + std::to_string(count) +
          " elements saved for a shuffle buffer of " + std::to_string(buffer_size_));
    slots_.clear();
    free_.clear();
    order_.clear();
    rows_.clear();
    for (uint64_t i = 0; i < count; ++i) {
      if (by_rows)
        rows_.push_back(reader.read_i64());
      else
        store(reader.read_element());
    }
    input_->restore(reader);
    mode_ = by_rows ? Mode::kRows : Mode::kElements;
    if (!by_rows) return;
    const RandomAccess* rows = input_->random_access();
    if (!rows)
      throw InvalidArgumentError(
          "iterator state does not match this pipeline: the shuffle buffer was saved as row "
          "numbers of an indexable input (a cache or tensor slices) but this pipeline's input "
          "is not one");
    // Buffered rows are rows the input has already passed.
    for (int64_t row : rows_)
      if (row < 0 || row >= rows->position())
        throw InvalidArgumentError(
            "iterator state does not match this pipeline: the shuffle "
            "buffer holds row " +
            std::to_string(row) + " of an input at row " + std::to_string(rows->position()));
  }

 private:
  enum class Mode { kUndecided, kRows, kElements };

  void report_filling(size_t count) {
    progress_.tick([&] {
      log::info("Filling up shuffle buffer (this may take a while): {} of {}", count, buffer_size_);
    });
  }
  void finish_filling() {
    if (!progress_.reported()) return;
    log::info("Shuffle buffer filled.");
    progress_.restart();
  }

  // The buffer is far larger than the caches, so the element a draw picks is cold, and moving
  // it out waits on its slot and then on its map's root node. Draw ahead on a copy of the
  // generator (the real one, hence the order and the saved state, is untouched) and start
  // loading what the next two calls will most likely pick: the slot two draws ahead, and the
  // tree node of the one a draw ahead (whose slot the previous call fetched). A wrong guess
  // (the input ends, or a pick lands on an element not read yet) only wastes a prefetch.
  void prefetch_next_draws() {
    size_t held = order_.size();
    size_t n = held + (input_done_ ? 0 : 1);  // the next call first tops the buffer up by one
    if (n == 0) return;
    ops::Generator peek = generator_;
    size_t first = static_cast<size_t>(peek.next_u64() % n);
    size_t second = static_cast<size_t>(peek.next_u64() % n);
    if (second < held) __builtin_prefetch(&slots_[order_[second]]);
    if (first < held) {
      const Features& features = slots_[order_[first]].features;
      if (!features.empty()) {
        // The first node (the root too, for the usual one- or two-feature element): its
        // value, and the tree links stored just before it.
        const char* node = reinterpret_cast<const char*>(&*features.begin());
        __builtin_prefetch(node - 32);
        __builtin_prefetch(node);
      }
    }
  }

  void store(Element element) {
    if (slots_.empty()) {
      // Growing the buffer by doubling moves every element held so far, several times over;
      // reserve what a typical buffer needs up front (large ones still grow past it).
      size_t expected = static_cast<size_t>(std::min<int64_t>(buffer_size_, kReserveLimit));
      slots_.reserve(expected);
      free_.reserve(expected);
      order_.reserve(expected);
    }
    if (free_.empty()) {
      free_.push_back(static_cast<uint32_t>(slots_.size()));
      slots_.emplace_back();
    }
    uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = std::move(element);
    order_.push_back(slot);
  }

  // Decided on the first call (or by restore) and kept: one iterator never mixes the two.
  const RandomAccess* indexed() {
    if (mode_ == Mode::kUndecided) mode_ = input_->random_access() ? Mode::kRows : Mode::kElements;
    return mode_ == Mode::kRows ? input_->random_access() : nullptr;
  }

  std::optional<Element> next_row(const RandomAccess& rows) {
    std::optional<int64_t> row = draw_row(rows);
    if (!row) return std::nullopt;
    return rows.at(*row);
  }

  std::optional<int64_t> draw_row(const RandomAccess& rows) {
    while (!input_done_ && static_cast<int64_t>(rows_.size()) < buffer_size_) {
      int64_t row = rows.position();
      if (input_->skip(1) == 0) {
        input_done_ = true;
        break;
      }
      rows_.push_back(row);
      report_filling(rows_.size());
    }
    finish_filling();
    if (rows_.empty()) return std::nullopt;
    size_t pick = static_cast<size_t>(generator_.next_u64() % rows_.size());
    std::swap(rows_[pick], rows_.back());
    int64_t row = rows_.back();
    rows_.pop_back();
    return row;
  }

  static constexpr int64_t kReserveLimit = int64_t{1} << 16;

  std::unique_ptr<IteratorBase> input_;
  int64_t buffer_size_;
  ops::Generator generator_;
  bool input_done_ = false;
  Mode mode_ = Mode::kUndecided;
  ProgressLog progress_;
  // Mode::kElements. Elements stay in their slot while the draws permute slot numbers, so a
  // draw moves 4 bytes instead of an element (whose map nodes are cold by then).
  std::vector<Element> slots_;
  std::vector<uint32_t> free_;   // unused slots
  std::vector<uint32_t> order_;  // the buffer, as slot numbers
  std::vector<int64_t> rows_;    // Mode::kRows
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
  std::string name() const override { return "shuffle"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  // Keeps the seed, and the order of an unseeded shuffle without reshuffle_each_iteration.
  NodePtr with_input(NodePtr input) const override {
    auto copy = std::make_shared<ShuffleNode>(*this);
    copy->input_ = std::move(input);
    return copy;
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
