// Sources: slices of tensors (also what the IDX reader loads into), a fixed list of elements,
// range, and elements from a C++ callable.
#include <mutex>

#include "data/row_position.h"
#include "data/stages.h"

namespace est::data {
namespace {

// --- Slices: rows of an element whose tensors share their first dimension ---

// The loaded rows, and (for a source decoding in the background) how far they have arrived.
struct LoadedRows {
  RowStore store;
  std::shared_ptr<const ArrivingRows> arriving;
};

class SlicesNode final : public DatasetNode {
 public:
  SlicesNode(std::function<LoadedColumns()> load, std::string what, bool reloadable)
      : load_(std::move(load)), what_(std::move(what)), reloadable_(reloadable) {}

  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override;
  std::string name() const override { return what_; }
  // Loads the rows (which the iterators then share).
  int64_t cardinality() const override { return data()->store.rows; }

  void release_reloadable() const override {
    if (!reloadable_) return;
    std::lock_guard lock(mutex_);
    data_.reset();
  }

  // Loads on first use (again after release_reloadable()); every iterator shares the loaded
  // tensors.
  std::shared_ptr<const LoadedRows> data() const {
    std::lock_guard lock(mutex_);
    if (!data_) {
      LoadedColumns loaded = load_();
      const Element& columns = loaded.columns;
      int64_t rows = -1;
      std::string first;
      for_each_component(columns, [&](std::string_view name, const Tensor& t) {
        if (t.rank() == 0)
          throw InvalidArgumentError(what_ + ": component '" + std::string(name) +
                                     "' is a scalar; slicing needs tensors of rank >= 1");
        if (rows < 0) {
          rows = t.dim(0);
          first = name;
        } else if (t.dim(0) != rows) {
          throw InvalidArgumentError(what_ + ": components disagree on the first dimension: '" +
                                     first + "' has " + std::to_string(rows) + " rows, '" +
                                     std::string(name) + "' has " + std::to_string(t.dim(0)));
        }
        if (t.is_sparse())
          throw UnimplementedError(what_ + ": component '" + std::string(name) +
                                   "' is a sparse tensor; slice its dense form "
                                   "(sparse::to_dense) or build the rows with from_elements");
        if (!t.device().is_cpu())
          throw UnimplementedError(what_ + ": component '" + std::string(name) + "' is on " +
                                   t.device().str() + "; input pipelines read host tensors");
      });
      data_ = std::make_shared<const LoadedRows>(LoadedRows{
          RowStore::from_columns(columns, std::max<int64_t>(rows, 0)), std::move(loaded.arriving)});
    }
    return data_;
  }

 private:
  std::function<LoadedColumns()> load_;
  std::string what_;
  bool reloadable_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const LoadedRows> data_;
};

class SlicesIterator final : public IteratorBase, public RandomAccess {
 public:
  explicit SlicesIterator(std::shared_ptr<const LoadedRows> data)
      : data_(std::move(data)), rows_(data_->store.rows), arrived_(data_->arriving ? -1 : rows_) {}

  std::optional<Element> next() override {
    if (row_ >= rows_) {
      arrived(rows_);  // the end is reported once the whole file is decoded and checked
      return std::nullopt;
    }
    arrived(row_ + 1);
    return data_->store.row(row_++);
  }

  const RandomAccess* random_access() const override { return this; }
  int64_t position() const override { return row_; }
  const RowStore* row_store() const override { return &data_->store; }
  std::optional<int64_t> next_row() override {
    if (row_ >= rows_) {
      arrived(rows_);
      return std::nullopt;
    }
    arrived(row_ + 1);
    return row_++;
  }
  Element at(int64_t row) const override {
    arrived(row + 1);
    return data_->store.row(row);
  }

  int64_t skip(int64_t count) override {
    arrived(count >= rows_ - row_ ? rows_ : row_ + std::max<int64_t>(count, 0));
    return skip_rows(row_, rows_, count);
  }

  void save(StateWriter& writer) override { save_row(writer, "slices", row_); }

  void restore(StateReader& reader) override {
    row_ = restore_row(reader, "slices", rows_, [&](int64_t row) {
      return "saved position " + std::to_string(row) + " of a source with " +
             std::to_string(rows_) + " rows";
    });
    arrived(row_);  // a restored shuffle buffer may name any row before the position
  }

 private:
  // Waits until the first `rows` rows are there (at once for tensors loaded whole).
  void arrived(int64_t rows) const {
    if (rows <= arrived_ || !data_->arriving) return;
    arrived_ = data_->arriving->wait_for(rows);
  }

  std::shared_ptr<const LoadedRows> data_;
  int64_t rows_;
  int64_t row_ = 0;
  mutable int64_t arrived_;  // rows known to be there (-1: not even the end of an empty file)
};

std::unique_ptr<IteratorBase> SlicesNode::make_iterator(const IteratorContext&) const {
  return std::make_unique<SlicesIterator>(data());
}

// --- A fixed list of elements ---

class ElementsNode final : public ElementListStage {
 public:
  ElementsNode(std::vector<Element> elements, std::string what)
      : elements_(std::make_shared<const std::vector<Element>>(std::move(elements))),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override;
  std::string name() const override { return what_; }
  int64_t size() const override { return static_cast<int64_t>(elements_->size()); }
  int64_t cardinality() const override { return size(); }

 private:
  std::shared_ptr<const std::vector<Element>> elements_;
  std::string what_;
};

class ElementsIterator final : public IteratorBase, public RandomAccess {
 public:
  explicit ElementsIterator(std::shared_ptr<const std::vector<Element>> elements)
      : elements_(std::move(elements)) {}

  std::optional<Element> next() override {
    if (index_ >= elements_->size()) return std::nullopt;
    return (*elements_)[index_++];
  }

  int64_t skip(int64_t count) override {
    int64_t skipped = std::min<int64_t>(count, static_cast<int64_t>(elements_->size() - index_));
    index_ += static_cast<size_t>(skipped);
    return skipped;
  }

  const RandomAccess* random_access() const override { return this; }
  int64_t position() const override { return static_cast<int64_t>(index_); }
  Element at(int64_t row) const override { return (*elements_)[static_cast<size_t>(row)]; }

  void save(StateWriter& writer) override {
    writer.begin_stage("elements");
    writer.write_u64(index_);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("elements");
    uint64_t index = reader.read_u64();
    if (index > elements_->size())
      throw InvalidArgumentError("iterator state does not match this pipeline: saved position " +
                                 std::to_string(index) + " of a source with " +
                                 std::to_string(elements_->size()) + " elements");
    index_ = index;
  }

 private:
  std::shared_ptr<const std::vector<Element>> elements_;
  size_t index_ = 0;
};

std::unique_ptr<IteratorBase> ElementsNode::make_iterator(const IteratorContext&) const {
  return std::make_unique<ElementsIterator>(elements_);
}

// --- range ---

class RangeIterator final : public IteratorBase {
 public:
  RangeIterator(int64_t start, int64_t stop, int64_t step)
      : start_(start), stop_(stop), step_(step), current_(start) {}

  std::optional<Element> next() override {
    if (step_ > 0 ? current_ >= stop_ : current_ <= stop_) return std::nullopt;
    Element out(Tensor::scalar(static_cast<double>(current_), DType::kI64));
    // Scalars through double lose precision past 2^53; write the exact value.
    *out.value.data<int64_t>() = current_;
    current_ += step_;
    return out;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("range");
    writer.write_i64(current_);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("range");
    current_ = reader.read_i64();
    if ((current_ - start_) % step_ != 0)
      throw InvalidArgumentError("iterator state does not match this pipeline: position " +
                                 std::to_string(current_) + " is not in range(" +
                                 std::to_string(start_) + ", " + std::to_string(stop_) + ", " +
                                 std::to_string(step_) + ")");
  }

 private:
  int64_t start_, stop_, step_, current_;
};

class RangeNode final : public DatasetNode {
 public:
  RangeNode(int64_t start, int64_t stop, int64_t step) : start_(start), stop_(stop), step_(step) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override {
    return std::make_unique<RangeIterator>(start_, stop_, step_);
  }
  std::string name() const override { return "range"; }
  int64_t cardinality() const override {
    if ((step_ > 0 && stop_ <= start_) || (step_ < 0 && stop_ >= start_)) return 0;
    int64_t span = step_ > 0 ? stop_ - start_ : start_ - stop_;
    int64_t stride = step_ > 0 ? step_ : -step_;
    return (span + stride - 1) / stride;
  }

 private:
  int64_t start_, stop_, step_;
};

// --- from_generator: restores by calling the factory again and replaying ---

class GeneratorIterator final : public IteratorBase {
 public:
  explicit GeneratorIterator(GeneratorFactory factory)
      : factory_(std::move(factory)), generator_(factory_()) {}

  std::optional<Element> next() override {
    if (done_) return std::nullopt;
    std::optional<Element> out = generator_();
    if (!out) {
      done_ = true;
      return std::nullopt;
    }
    ++produced_;
    return out;
  }

  void save(StateWriter& writer) override {
    writer.begin_stage("generator");
    writer.write_i64(produced_);
    writer.write_bool(done_);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage("generator");
    int64_t produced = reader.read_i64();
    bool done = reader.read_bool();
    generator_ = factory_();
    produced_ = 0;
    done_ = false;
    for (int64_t i = 0; i < produced; ++i) {
      if (!generator_())
        throw FailedPreconditionError(
            "from_generator: restoring needs to replay " + std::to_string(produced) +
            " elements but the generator ended after " + std::to_string(i) +
            "; exact resume requires a deterministic generator");
      ++produced_;
    }
    done_ = done;
  }

 private:
  GeneratorFactory factory_;
  GeneratorFn generator_;
  int64_t produced_ = 0;
  bool done_ = false;
};

class GeneratorNode final : public DatasetNode {
 public:
  explicit GeneratorNode(GeneratorFactory factory) : factory_(std::move(factory)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override {
    return std::make_unique<GeneratorIterator>(factory_);
  }
  std::string name() const override { return "from_generator"; }

 private:
  GeneratorFactory factory_;
};

// --- Files, one after another ---

class FileSourceIterator final : public IteratorBase {
 public:
  FileSourceIterator(const std::vector<std::string>& paths, const OpenFileFn& open,
                     const std::string& stage)
      : paths_(paths), open_(open), stage_(stage) {}

  std::optional<Element> next() override {
    for (;;) {
      if (!reader_) {
        if (file_index_ >= paths_.size()) return std::nullopt;
        reader_ = open_(paths_[file_index_]);
      }
      if (std::optional<Element> element = reader_->next()) return element;
      reader_.reset();
      ++file_index_;
    }
  }

  void save(StateWriter& writer) override {
    writer.begin_stage(stage_);
    writer.write_u64(file_index_);
    writer.write_bool(reader_ != nullptr);
    if (reader_) reader_->save(writer);
  }

  void restore(StateReader& reader) override {
    reader.expect_stage(stage_);
    uint64_t file_index = reader.read_u64();
    bool open = reader.read_bool();
    if (file_index > paths_.size() || (open && file_index == paths_.size()))
      throw InvalidArgumentError("iterator state does not match this pipeline: it was in file " +
                                 std::to_string(file_index) + " of a " + stage_ + " source over " +
                                 std::to_string(paths_.size()) + " files");
    reader_.reset();
    file_index_ = file_index;
    if (open) {
      reader_ = open_(paths_[file_index_]);
      reader_->restore(reader);
    }
  }

 private:
  const std::vector<std::string>& paths_;
  const OpenFileFn& open_;
  const std::string& stage_;
  size_t file_index_ = 0;
  std::unique_ptr<FileReader> reader_;
};

class FileSourceNode final : public FileListStage {
 public:
  FileSourceNode(std::vector<std::string> paths, OpenFileFn open, std::string stage,
                 std::string what)
      : paths_(std::move(paths)),
        open_(std::move(open)),
        stage_(std::move(stage)),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext&) const override {
    return std::make_unique<FileSourceIterator>(paths_, open_, stage_);
  }
  std::string name() const override { return what_; }
  const std::vector<std::string>& paths() const override { return paths_; }
  NodePtr with_paths(std::vector<std::string> paths) const override {
    return std::make_shared<FileSourceNode>(std::move(paths), open_, stage_, what_);
  }

 private:
  std::vector<std::string> paths_;
  OpenFileFn open_;
  std::string stage_;
  std::string what_;
};

}  // namespace

NodePtr make_file_source_node(std::vector<std::string> paths, OpenFileFn open, std::string stage,
                              std::string what) {
  return std::make_shared<FileSourceNode>(std::move(paths), std::move(open), std::move(stage),
                                          std::move(what));
}

NodePtr make_slices_node(std::function<Element()> load, std::string what, bool reloadable) {
  return std::make_shared<SlicesNode>(
      [load = std::move(load)] {
        return LoadedColumns{load(), nullptr};
      },
      std::move(what), reloadable);
}

NodePtr make_arriving_slices_node(std::function<LoadedColumns()> load, std::string what,
                                  bool reloadable) {
  return std::make_shared<SlicesNode>(std::move(load), std::move(what), reloadable);
}

NodePtr make_elements_node(std::vector<Element> elements, std::string what) {
  return std::make_shared<ElementsNode>(std::move(elements), std::move(what));
}

NodePtr make_range_node(int64_t start, int64_t stop, int64_t step) {
  return std::make_shared<RangeNode>(start, stop, step);
}

NodePtr make_generator_node(GeneratorFactory factory) {
  return std::make_shared<GeneratorNode>(std::move(factory));
}

}  // namespace est::data
