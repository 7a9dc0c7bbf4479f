// cache() and cache(path): the first complete pass over the input is recorded, later passes
// (the next epochs of repeat()) read the recording instead of recomputing it.
//
// A pass that stops early records nothing, as in tf.data, so a cache is never partial. The file
// cache is a TFRecord file of serialised elements (so it is CRC-checked), written to a temporary
// name and renamed when complete; it is reused by later runs that find it. Restoring an
// iterator that was reading a cache which this process has not filled yet fills it first, by
// reading the input from the start (exact when the input is deterministic). Restoring one that
// was filling continues from the input's saved position and leaves the recording to the next
// pass.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "data/stages.h"
#include "data/tfrecord.h"

namespace est::data {
namespace {

// --- Memory ---

struct MemoryCache {
  std::mutex mutex;
  std::shared_ptr<const std::vector<Element>> elements;  // null until a pass completes

  std::shared_ptr<const std::vector<Element>> get() {
    std::lock_guard lock(mutex);
    return elements;
  }
  void publish(std::vector<Element> recorded) {
    std::lock_guard lock(mutex);
    if (!elements) elements = std::make_shared<const std::vector<Element>>(std::move(recorded));
  }
};

class MemoryCacheIterator final : public IteratorBase {
 public:
  MemoryCacheIterator(NodePtr input, std::shared_ptr<MemoryCache> cache, IteratorContext context)
      : node_(std::move(input)), cache_(std::move(cache)), context_(context) {
    elements_ = cache_->get();
    if (!elements_) input_ = node_->make_iterator(context_);
  }

  std::optional<Element> next() override {
    if (elements_) {
      if (index_ >= elements_->size()) return std::nullopt;
      return (*elements_)[index_++];
    }
    std::optional<Element> element = input_->next();
    if (element) {
      if (recording_) recorded_.push_back(*element);
      return element;
    }
    if (recording_) {
      cache_->publish(std::move(recorded_));
      recorded_.clear();
      recording_ = false;
    }
    return std::nullopt;
  }

  int64_t skip(int64_t count) override {
    if (!elements_) return IteratorBase::skip(count);
    int64_t skipped = std::min<int64_t>(count, static_cast<int64_t>(elements_->size() - index_));
    index_ += static_cast<size_t>(skipped);
    return skipped;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("cache");
    writer.write_bool(elements_ != nullptr);
    if (elements_)
      writer.write_u64(index_);
    else
      input_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("cache");
    recorded_.clear();
    recording_ = false;
    if (reader.read_bool()) {
      uint64_t index = reader.read_u64();
      input_.reset();
      elements_ = cache_->get();
      if (!elements_) {
        fill();
        elements_ = cache_->get();
      }
      if (index > elements_->size())
        throw InvalidArgumentError("iterator state does not match this pipeline: position " +
                                   std::to_string(index) + " in a cache of " +
                                   std::to_string(elements_->size()) + " elements");
      index_ = static_cast<size_t>(index);
    } else {
      elements_.reset();
      input_ = node_->make_iterator(context_);
      input_->restore(reader);
    }
  }

 private:
  void fill() {
    std::vector<Element> recorded;
    auto input = node_->make_iterator(context_);
    while (std::optional<Element> element = input->next()) recorded.push_back(std::move(*element));
    cache_->publish(std::move(recorded));
  }

  NodePtr node_;
  std::shared_ptr<MemoryCache> cache_;
  IteratorContext context_;
  std::shared_ptr<const std::vector<Element>> elements_;  // reading a complete cache
  size_t index_ = 0;
  std::unique_ptr<IteratorBase> input_;  // filling
  bool recording_ = true;
  std::vector<Element> recorded_;
};

class MemoryCacheNode final : public DatasetNode {
 public:
  explicit MemoryCacheNode(NodePtr input)
      : input_(std::move(input)), cache_(std::make_shared<MemoryCache>()) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<MemoryCacheIterator>(input_, cache_, context);
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
