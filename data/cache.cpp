// cache() and cache(path): the first complete pass over the input is recorded, later passes
// (the next epochs of repeat()) read the recording instead of recomputing it.
//
// A pass that stops early records nothing, as in tf.data, so a cache is never partial. A
// complete memory cache cuts its last chunk to size and lets its input release what it can
// load again (a file source's decoded tensors, DatasetNode::release_reloadable). The file
// cache is a TFRecord file of serialised elements (so it is CRC-checked), written to a temporary
// name and renamed when complete; it is reused by later runs that find it. Restoring an
// iterator that was reading a cache which this process has not filled yet fills it first, by
// reading the input from the start (exact when the input is deterministic).
//
// A memory cache being filled saves a position, not its data: the number of elements read and
// the input's state. While filling it offers the rows recorded so far by number, so a
// shuffle() after it buffers row numbers too and its state stays small (it held the shuffle
// buffer's elements before: 33 MB for the README's Fashion-MNIST pipeline). Restoring reads
// those elements again from the start of the input (deterministic, as above) and goes on
// recording. A file cache being filled saves its input's state and leaves the recording to
// the next pass.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "data/page_populator.h"
#include "data/progress.h"
#include "data/stages.h"
#include "data/tfrecord.h"

namespace est::data {
namespace {

// --- Memory ---

// What a pass records: rows in a column store while every element has the same shapes (so
// later epochs cost one memcpy per row and batch() gathers from the columns), else the elements
// themselves. Recording copies the data, so the element handed downstream is freed as usual.
class Recording {
 public:
  void add(const Element& element) {
    if (!store_ && elements_.empty()) store_ = RowStore::shaped_like(element, kChunkBytes);
    if (store_ && store_->matches(element)) {
      store_->append(element);
      populate_ahead();
      return;
    }
    if (store_) {  // shapes vary: fall back to keeping elements
      for (int64_t row = 0; row < store_->rows; ++row) elements_.push_back(store_->row(row));
      populator_.reset();
      store_.reset();
    }
    elements_.push_back(element);
  }
  int64_t size() const { return store_ ? store_->rows : static_cast<int64_t>(elements_.size()); }
  Element at(int64_t row) const {
    return store_ ? store_->row(row) : elements_[static_cast<size_t>(row)];
  }
  const RowStore* store() const { return store_ ? &*store_ : nullptr; }
  // The pass is complete: the last chunk is cut to the rows it holds.
  void shrink_to_fit() {
    populator_.reset();
    if (store_) store_->shrink_to_fit();
  }

 private:
  // The widest column's chunk is written front to back into fresh memory: a thread faults its
  // pages in ahead of the copies (data/page_populator.h), once the recording is megabytes long.
  void populate_ahead() {
    RowStore::Column* widest = nullptr;
    for (RowStore::Column& column : store_->columns)
      if (!widest || column.row_bytes > widest->row_bytes) widest = &column;
    if (!widest || widest->row_bytes == 0) return;
    const int64_t in_chunk = (store_->rows - 1) % store_->chunk_rows + 1;
    if (!populator_) populator_ = std::make_unique<PagePopulator>();
    populator_->wrote(const_cast<char*>(widest->data.back()),
                      static_cast<size_t>(store_->chunk_rows) * widest->row_bytes,
                      static_cast<size_t>(in_chunk) * widest->row_bytes);
  }

  static constexpr size_t kChunkBytes = size_t{8} << 20;
  std::optional<RowStore> store_;
  std::vector<Element> elements_;
  std::unique_ptr<PagePopulator> populator_;  // while filling; stopped before the chunks go
};

struct MemoryCache {
  std::mutex mutex;
  std::shared_ptr<const Recording> recording;  // null until a pass completes

  std::shared_ptr<const Recording> get() {
    std::lock_guard lock(mutex);
    return recording;
  }
  void publish(std::shared_ptr<const Recording> complete) {
    std::lock_guard lock(mutex);
    if (!recording) recording = std::move(complete);
  }
};

// Three states: reading a complete recording (cached_); filling while recording (input_ and
// recorded_), which offers random access to the rows recorded so far, so that a shuffle()
// after it keeps row numbers and its saved state is positions, not elements; and filling
// without recording (restored from a state saved before positions were saved).
class MemoryCacheIterator final : public IteratorBase, public RandomAccess {
 public:
  MemoryCacheIterator(NodePtr input, std::shared_ptr<MemoryCache> cache, IteratorContext context)
      : node_(std::move(input)), cache_(std::move(cache)), context_(context) {
    cached_ = cache_->get();
    if (!cached_) {
      input_ = node_->make_iterator(context_);
      recorded_ = std::make_shared<Recording>();
    }
  }

  ~MemoryCacheIterator() override {
    if (input_ && recorded_ && recorded_->size() > 0)
      log::warning(
          "The calling iterator did not fully read the dataset being cached. In order to avoid "
          "unexpected truncation of the dataset, the partially cached contents of the dataset "
          "will be discarded ({} elements). This can happen if you have an input pipeline "
          "similar to `dataset.cache().take(k).repeat()`; use `dataset.take(k).cache().repeat()` "
          "instead.",
          recorded_->size());
  }

  std::optional<Element> next() override {
    if (!input_) {
      if (index_ >= cached_->size()) return std::nullopt;
      return cached_->at(index_++);
    }
    std::optional<Element> element = input_->next();
    if (element) {
      if (recorded_) {
        recorded_->add(*element);
        progress_.tick([&] {
          log::info("Caching the dataset in memory: {} elements so far", recorded_->size());
        });
      }
      return element;
    }
    finish_pass();
    return std::nullopt;
  }

  const RandomAccess* random_access() const override {
    return !input_ || recorded_ ? this : nullptr;
  }
  int64_t position() const override { return input_ ? recorded_->size() : index_; }
  Element at(int64_t row) const override {
    const Recording& rows = input_ ? *recorded_ : *cached_;
    if (row < 0 || row >= rows.size())
      throw InternalError("cache: row " + std::to_string(row) + " requested of " +
                          std::to_string(rows.size()));
    return rows.at(row);
  }
  // Only a complete recording: while filling, a recording may still change its layout.
  const RowStore* row_store() const override { return input_ ? nullptr : cached_->store(); }
  std::optional<int64_t> next_row() override {
    if (index_ >= cached_->size()) return std::nullopt;
    return index_++;
  }

  int64_t skip(int64_t count) override {
    if (input_) return IteratorBase::skip(count);
    int64_t skipped = std::min(count, cached_->size() - index_);
    index_ += skipped;
    return skipped;
  }

  // kReading: the position in the recording. kFillingAt: how many elements the pass has read
  // (the recording is rebuilt from the input on restore) and the input's own state.
  // kFilling: the input's state only (states saved before kFillingAt existed).
  enum SavedMode : uint64_t { kFilling = 0, kReading = 1, kFillingAt = 2 };

  void save(StateWriter& writer) override {
    writer.begin_stage("cache");
    if (!input_) {
      writer.write_u64(kReading);
      writer.write_i64(index_);
    } else if (recorded_) {
      writer.write_u64(kFillingAt);
      writer.write_i64(recorded_->size());
      input_->save(writer);
    } else {
      writer.write_u64(kFilling);
      input_->save(writer);
    }
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("cache");
    recorded_.reset();
    uint64_t mode = reader.read_u64();
    if (mode == kReading) {
      int64_t index = reader.read_i64();
      input_.reset();
      cached_ = cache_->get();
      if (!cached_) {
        fill();
        cached_ = cache_->get();
      }
      if (index < 0 || index > cached_->size())
        throw InvalidArgumentError("iterator state does not match this pipeline: position " +
                                   std::to_string(index) + " in a cache of " +
                                   std::to_string(cached_->size()) + " elements");
      index_ = index;
    } else if (mode == kFillingAt) {
      int64_t position = reader.read_i64();
      if (position < 0)
        throw DataLossError("iterator state is damaged: a cache filled to position " +
                            std::to_string(position));
      cached_.reset();
      input_ = node_->make_iterator(context_);
      input_->restore(reader);
      recorded_ = replay(position);
    } else if (mode == kFilling) {
      cached_.reset();
      input_ = node_->make_iterator(context_);
      input_->restore(reader);
    } else {
      throw DataLossError("iterator state is damaged: unknown cache mode " + std::to_string(mode));
    }
  }

 private:
  // The pass is over: a recording becomes the cache (ours is what our rows refer to, even when
  // another iterator published first).
  void finish_pass() {
    if (recorded_) {
      if (progress_.reported())
        log::info("Cached the dataset in memory: {} elements", recorded_->size());
      recorded_->shrink_to_fit();
      cached_ = recorded_;
      cache_->publish(cached_);
      recorded_.reset();
      node_->release_reloadable();  // read again only by a restore of a filling pass
    } else {
      cached_ = std::make_shared<Recording>();  // nothing recorded: an empty remainder
    }
    index_ = cached_->size();
    input_.reset();
  }

  // The first `count` elements of the input, read again: what a restored filling pass had
  // recorded. Exact when the input is deterministic, as restoring a reading cache into a
  // process whose cache is empty already assumes (fill()).
  std::shared_ptr<Recording> replay(int64_t count) {
    auto recorded = std::make_shared<Recording>();
    auto input = node_->make_iterator(context_);
    ProgressLog progress;
    while (recorded->size() < count) {
      std::optional<Element> element = input->next();
      if (!element)
        throw InvalidArgumentError(
            "iterator state does not match this pipeline: the cache had read " +
            std::to_string(count) + " elements of its input, which now ends after " +
            std::to_string(recorded->size()) +
            "; cache() reads its input again on restore, so the input must be deterministic");
      recorded->add(*element);
      progress.tick([&] {
        log::info("Refilling the dataset cache after a restore: {} of {} elements",
                  recorded->size(), count);
      });
    }
    return recorded;
  }

  void fill() {
    auto recorded = std::make_shared<Recording>();
    auto input = node_->make_iterator(context_);
    while (std::optional<Element> element = input->next()) recorded->add(*element);
    recorded->shrink_to_fit();
    cache_->publish(std::move(recorded));
    node_->release_reloadable();
  }

  NodePtr node_;
  std::shared_ptr<MemoryCache> cache_;
  IteratorContext context_;
  std::shared_ptr<const Recording> cached_;  // reading a complete cache
  int64_t index_ = 0;
  std::unique_ptr<IteratorBase> input_;  // filling
  std::shared_ptr<Recording> recorded_;  // filling: what this pass has read so far
  ProgressLog progress_;
};

class MemoryCacheNode final : public DatasetNode {
 public:
  explicit MemoryCacheNode(NodePtr input)
      : input_(std::move(input)), cache_(std::make_shared<MemoryCache>()) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<MemoryCacheIterator>(input_, cache_, context);
  }
  std::string name() const override { return "cache"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<MemoryCacheNode>(std::move(input));  // an empty cache of its own
  }

 private:
  NodePtr input_;
  std::shared_ptr<MemoryCache> cache_;  // shared by all iterators: epochs 2+ read it
};

// --- File ---

std::string temporary_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

class FileCacheIterator final : public IteratorBase {
 public:
  FileCacheIterator(NodePtr input, const std::string& path, IteratorContext context)
      : node_(std::move(input)), path_(path), context_(context) {
    if (std::filesystem::exists(path_)) {
      reader_ = std::make_unique<TFRecordReader>(path_);
    } else {
      input_ = node_->make_iterator(context_);
      temporary_ = temporary_name(path_);
      writer_ = std::make_unique<TFRecordWriter>(temporary_);
    }
  }

  ~FileCacheIterator() override { abandon(); }

  std::optional<Element> next() override {
    if (reader_) {
      int64_t index = reader_->record_index();
      if (!reader_->read(record_)) return std::nullopt;
      return deserialize_element(record_,
                                 "cache file '" + path_ + "' record " + std::to_string(index));
    }
    std::optional<Element> element = input_->next();
    if (element) {
      if (writer_) writer_->write(serialize_element(*element));
      return element;
    }
    if (writer_) finish();
    return std::nullopt;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("file_cache");
    writer.write_bool(reader_ != nullptr);
    if (reader_) {
      writer.write_u64(reader_->offset());
      writer.write_i64(reader_->record_index());
    } else {
      input_->save(writer);
    }
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("file_cache");
    abandon();
    if (reader.read_bool()) {
      uint64_t offset = reader.read_u64();
      int64_t index = reader.read_i64();
      input_.reset();
      if (!std::filesystem::exists(path_)) fill();
      reader_ = std::make_unique<TFRecordReader>(path_);
      reader_->seek(offset, index);
    } else {
      reader_.reset();
      input_ = node_->make_iterator(context_);
      input_->restore(reader);
    }
  }

 private:
  void finish() {
    writer_->close();
    writer_.reset();
    std::error_code error;
    if (std::filesystem::exists(path_))  // another iterator finished first: keep its file
      std::filesystem::remove(temporary_, error);
    else
      std::filesystem::rename(temporary_, path_, error);
    if (error)
      throw UnknownError("cannot move the finished cache '" + temporary_ + "' to '" + path_ +
                         "': " + error.message());
  }

  void abandon() {
    if (!writer_) return;
    writer_.reset();
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
  }

  void fill() {
    auto input = node_->make_iterator(context_);
    temporary_ = temporary_name(path_);
    writer_ = std::make_unique<TFRecordWriter>(temporary_);
    while (std::optional<Element> element = input->next())
      writer_->write(serialize_element(*element));
    finish();
  }

  NodePtr node_;
  const std::string& path_;
  IteratorContext context_;
  std::unique_ptr<TFRecordReader> reader_;  // reading a complete cache file
  std::string record_;
  std::unique_ptr<IteratorBase> input_;  // filling
  std::string temporary_;
  std::unique_ptr<TFRecordWriter> writer_;
};

class FileCacheNode final : public DatasetNode {
 public:
  FileCacheNode(NodePtr input, std::string path)
      : input_(std::move(input)), path_(std::move(path)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<FileCacheIterator>(input_, path_, context);
  }
  std::string name() const override { return "cache(" + path_ + ")"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<FileCacheNode>(std::move(input), path_);
  }

 private:
  NodePtr input_;
  std::string path_;
};

}  // namespace

NodePtr make_memory_cache_node(NodePtr input) {
  return std::make_shared<MemoryCacheNode>(std::move(input));
}

NodePtr make_file_cache_node(NodePtr input, std::string path) {
  return std::make_shared<FileCacheNode>(std::move(input), std::move(path));
}

}  // namespace est::data
