// The pipeline's internal interface: an immutable node per stage, and the iterators it makes.
//
// A Dataset is a shared_ptr to the last node; each node holds its input node, so a pipeline is
// a chain of immutable descriptions that any number of iterators can walk independently. An
// iterator pulls from its input iterator (next), and writes or reads its position (save /
// restore) as described in state.h. Stages live in their own .cpp files and are created
// through the functions at the bottom, which Dataset's methods call.
//
// A node also describes itself for rewrites of a whole pipeline (auto-sharding, auto_shard.h):
// its name, its input, and a copy of itself over another input; the stages a rewrite changes
// offer more through the interfaces in stages.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data/cardinality.h"
#include "data/element.h"
#include "data/row_store.h"
#include "data/state.h"

namespace est::data {

// Passed down when iterators are created. `epoch_key` distinguishes the passes that repeat()
// makes, so that shuffle(reshuffle_each_iteration) draws a new order every epoch while staying
// a pure function of (seed, epoch) and hence restorable.
struct IteratorContext {
  uint64_t epoch_key = 0;
};

// Offered by iterators whose input is an indexable store (a filled cache, tensor slices), so
// that shuffle() can permute row numbers instead of moving elements: fewer copies and a state
// of row numbers rather than serialised elements.
class RandomAccess {
 public:
  virtual ~RandomAccess() = default;
  virtual int64_t position() const = 0;  // the row next() would return
  virtual Element at(int64_t row) const = 0;
};

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // The next element, or nullopt at the end of input (a normal event, not an error).
  virtual std::optional<Element> next() = 0;
  // Skips up to `count` elements and returns how many were skipped (fewer at the end of input).
  // Sources override it to skip without building elements.
  virtual int64_t skip(int64_t count);
  // Non-null while the remaining input can be read by row number (see RandomAccess).
  virtual const RandomAccess* random_access() const { return nullptr; }
  // Non-null when every element this iterator yields is a row of a RowStore; next_row() then
  // gives the row number that next() would have returned as an element (nullopt at the end),
  // so batch() can copy rows straight from the columns into the batch.
  virtual const RowStore* row_store() const { return nullptr; }
  virtual std::optional<int64_t> next_row();
  virtual void save(StateWriter& writer) = 0;
  virtual void restore(StateReader& reader) = 0;
};

class DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const = 0;

  // The stage as the user wrote it ("map", "from_tensor_slices", "tfrecord_dataset"), for
  // messages.
  virtual std::string name() const = 0;
  // The stage's input; null for a source.
  virtual NodePtr input() const { return nullptr; }
  // tf.data's cardinality: how many elements the stage yields when that is known without
  // iterating (a source's size, a one-to-one stage's input's, batch's rounded quotient, ...),
  // kInfiniteCardinality, or kUnknownCardinality (filter, interleave, generators, files).
  virtual int64_t cardinality() const { return kUnknownCardinality; }
  // The same stage over `input`, sharing no mutable state with this one (a memory cache starts
  // empty). Sources have no input to replace: InternalError.
  virtual NodePtr with_input(NodePtr input) const;
  // Frees what this stage and the stages before it hold that they can load again (a file
  // source's decoded tensors), for the next iterator to reload; iterators already made keep
  // theirs. A memory cache calls it once complete: its input is then read only by a restore.
  virtual void release_reloadable() const {
    if (NodePtr in = input()) in->release_reloadable();
  }
};

// Mixes two 64-bit values into one (splitmix64 finaliser), for seeds and epoch keys.
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace est::data
