// The CSV reader: a small state machine over InputStream's buffer (RFC 4180 quoting), then one
// std::from_chars per field.
#include "data/csv.h"

#include <charconv>
#include <cstring>
#include <limits>

#include "data/stages.h"

namespace est::data {

namespace {

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

class CsvFileReader final : public FileReader {
 public:
  CsvFileReader(const std::string& path, const CsvOptions& options)
      : stream_(path, options.compression), options_(options) {
    for (int64_t i = 0; i < options_.skip; ++i)
      if (!skip_line()) break;
    std::vector<std::string> header;
    if (options_.header) {
      if (!read_record(header))
        throw InvalidArgumentError("CSV file '" + path +
                                   "' has no header line; set header = false "
                                   "or check the skip count");
    }
    resolve_columns(header);
  }

  std::optional<Element> next() override {
    if (!read_record(fields_)) return std::nullopt;
    if (fields_.size() != columns_.size())
      throw InvalidArgumentError(where() + ": expected " + std::to_string(columns_.size()) +
                                 " fields, found " + std::to_string(fields_.size()) +
                                 "; check the delimiter, quoting, or the column list");
    Element element;
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (!keep_[i]) continue;
      Tensor value = convert(i);
      if (columns_[i].name == options_.label_name)
        element.labels = value;
      else
        element.features.emplace(columns_[i].name, value);
    }
    return element;
  }

  void save(StateWriter& writer) override {
    writer.write_u64(stream_.offset() + position_);
    writer.write_i64(line_);
  }

  void restore(StateReader& reader) override {
    uint64_t offset = reader.read_u64();
    line_ = reader.read_i64();
    stream_.seek(offset);
    view_ = {};
    position_ = 0;
  }

 private:
  std::string where() const {
    return "CSV file '" + stream_.path() + "' line " + std::to_string(record_line_);
  }

  int get() {
    if (position_ == view_.size()) {
      stream_.consume(position_);
      view_ = stream_.peek();
      position_ = 0;
      if (view_.empty()) return -1;
    }
    return static_cast<unsigned char>(view_[position_++]);
  }
  void unget() { --position_; }

  bool skip_line() {
    for (int c = get(); c != -1; c = get())
      if (c == '\n') {
        ++line_;
        return true;
      }
    return false;
  }

  // One record into `fields`; false at the end of the file. Blank lines are skipped.
  bool read_record(std::vector<std::string>& fields) {
    fields.clear();
    int c = get();
    while (c == '\n' || c == '\r') {
      if (c == '\n') ++line_;
      c = get();
    }
    if (c == -1) return false;
    record_line_ = line_;
    const char delim = options_.field_delim;
    std::string field;
    for (;;) {
      field.clear();
      if (options_.use_quote_delim && c == '"') {
        for (;;) {
          c = get();
          if (c == -1)
            throw InvalidArgumentError(where() +
                                       ": a quoted field is not closed before the end "
                                       "of the file");
          if (c == '"') {
            c = get();
            if (c != '"') break;  // the closing quote; "" is an escaped quote
          } else if (c == '\n') {
            ++line_;
          }
          field.push_back(static_cast<char>(c));
        }
        if (c != delim && c != '\n' && c != '\r' && c != -1)
          throw InvalidArgumentError(where() + ": unexpected character '" +
                                     std::string(1, static_cast<char>(c)) +
                                     "' after a closing quote; quotes inside a quoted field are "
                                     "written \"\"");
      } else {
        while (c != delim && c != '\n' && c != '\r' && c != -1) {
          field.push_back(static_cast<char>(c));
          c = get();
        }
      }
      fields.push_back(field);
      if (c == delim) {
        c = get();
        continue;
      }
      if (c == '\r') {
        c = get();
        if (c != '\n' && c != -1) unget();
      }
      if (c == '\n') ++line_;
      return true;
    }
  }

  void resolve_columns(const std::vector<std::string>& header) {
    const std::string& path = stream_.path();
    columns_ = options_.columns;
    if (columns_.empty()) {
      if (header.empty())
        throw InvalidArgumentError("csv_dataset: '" + path +
                                   "' has no header and no columns "
                                   "were given; set CsvOptions::columns");
      columns_.resize(header.size());
    } else if (!header.empty() && header.size() != columns_.size()) {
      throw InvalidArgumentError("CSV file '" + path + "': the header has " +
                                 std::to_string(header.size()) + " columns but " +
                                 std::to_string(columns_.size()) + " were configured");
    }
    for (size_t i = 0; i < columns_.size(); ++i)
      if (columns_[i].name.empty())
        columns_[i].name = header.empty() ? "column" + std::to_string(i) : trim(header[i]);
    keep_.assign(columns_.size(), options_.select_columns.empty());
    for (const std::string& name : options_.select_columns) {
      bool found = false;
      for (size_t i = 0; i < columns_.size(); ++i)
        if (columns_[i].name == name) keep_[i] = found = true;
      if (!found)
        throw InvalidArgumentError("csv_dataset: selected column '" + name +
                                   "' is not among the "
                                   "columns of '" +
                                   path + "'");
    }
    if (!options_.label_name.empty()) {
      bool found = false;
      for (size_t i = 0; i < columns_.size(); ++i)
        if (columns_[i].name == options_.label_name && keep_[i]) found = true;
      if (!found)
        throw InvalidArgumentError("csv_dataset: label column '" + options_.label_name +
                                   "' is not among the (selected) columns of '" + path + "'");
    }
  }

  template <class T>
  T parse_number(const std::string& text, const CsvColumn& column) {
    std::string trimmed = trim(text);
    T value{};
    const char* begin = trimmed.data();
    const char* end = begin + trimmed.size();
    if (!trimmed.empty() && *begin == '+') ++begin;
    auto [ptr, error] = std::from_chars(begin, end, value);
    if (error != std::errc() || ptr != end || begin == end)
      throw InvalidArgumentError(where() + ", column '" + column.name + "': cannot parse '" + text +
                                 "' as " + std::string(ops::dtype_name(column.dtype)));
    return value;
  }

  // An integer column's default: default_int64 exactly, else default_value.
  static int64_t integer_default(const CsvColumn& column) {
    return column.default_int64 ? *column.default_int64
                                : static_cast<int64_t>(*column.default_value);
  }

  Tensor convert(size_t i) {
    const CsvColumn& column = columns_[i];
    const std::string& text = fields_[i];
    bool empty = text.empty() || (!options_.na_value.empty() && text == options_.na_value);
    // Text: an empty field is "" unless a default is given (make_csv_dataset's inferred default).
    if (column.dtype == DType::kString)
      return string_tensor({empty ? column.default_text.value_or("") : text}, {});
    if (column.dtype == DType::kU8)
      return bytes_tensor(empty ? column.default_text.value_or("") : text);
    if (empty && !column.default_value && !column.default_int64)
      throw InvalidArgumentError(where() + ", column '" + column.name +
                                 "': the field is empty and the column has no default_value");
    Tensor out = Tensor::empty({}, column.dtype);
    switch (column.dtype) {
      case DType::kF32:
        *out.data<float>() =
            empty ? static_cast<float>(*column.default_value) : parse_number<float>(text, column);
        break;
      case DType::kF64:
        *out.data<double>() = empty ? *column.default_value : parse_number<double>(text, column);
        break;
      case DType::kI32:
        *out.data<int32_t>() = empty ? static_cast<int32_t>(integer_default(column))
                                     : parse_number<int32_t>(text, column);
        break;
      case DType::kI64:
        *out.data<int64_t>() =
            empty ? integer_default(column) : parse_number<int64_t>(text, column);
        break;
      default:
        throw InvalidArgumentError(
            "csv_dataset: column '" + column.name + "' has dtype " +
            std::string(ops::dtype_name(column.dtype)) +
            "; use float32, float64, int32, int64, string or uint8 (text as bytes)");
    }
    return out;
  }

  InputStream stream_;
  const CsvOptions& options_;
  std::vector<CsvColumn> columns_;
  std::vector<bool> keep_;
  std::vector<std::string> fields_;
  std::string_view view_;  // stream_.peek(), read up to position_
  size_t position_ = 0;
  int64_t line_ = 1;         // the line get() is on (1-based)
  int64_t record_line_ = 1;  // where the current record started
};

}  // namespace

Dataset csv_dataset(std::vector<std::string> paths, CsvOptions options) {
  if (paths.empty()) throw InvalidArgumentError("csv_dataset: no file names given");
  if (options.skip < 0) throw InvalidArgumentError("csv_dataset: skip must be >= 0");
  if (!options.header && options.columns.empty())
    throw InvalidArgumentError(
        "csv_dataset: without a header, CsvOptions::columns must list the "
        "columns");
  if (options.use_quote_delim && options.field_delim == '"')
    throw InvalidArgumentError("csv_dataset: the delimiter cannot be '\"' while quoting is on");
  for (const CsvColumn& column : options.columns)
    if (column.dtype != DType::kF32 && column.dtype != DType::kF64 && column.dtype != DType::kI32 &&
        column.dtype != DType::kI64 && column.dtype != DType::kU8 && column.dtype != DType::kString)
      throw InvalidArgumentError(
          "csv_dataset: column '" + column.name + "' has dtype " +
          std::string(ops::dtype_name(column.dtype)) +
          "; use float32, float64, int32, int64, string or uint8 (text as bytes)");
  for (const CsvColumn& column : options.columns) {
    if (!column.default_int64) continue;
    if (column.default_value)
      throw InvalidArgumentError("csv_dataset: column '" + column.name +
                                 "' has both default_value and default_int64; give one");
    if (column.dtype != DType::kI64 && column.dtype != DType::kI32)
      throw InvalidArgumentError("csv_dataset: column '" + column.name + "' has dtype " +
                                 std::string(ops::dtype_name(column.dtype)) +
                                 "; default_int64 is for int64 and int32 columns (use "
                                 "default_value or default_text)");
    if (column.dtype == DType::kI32 &&
        (*column.default_int64 < std::numeric_limits<int32_t>::min() ||
         *column.default_int64 > std::numeric_limits<int32_t>::max()))
      throw InvalidArgumentError("csv_dataset: column '" + column.name + "': default_int64 " +
                                 std::to_string(*column.default_int64) +
                                 " does not fit its dtype int32");
  }
  auto shared = std::make_shared<const CsvOptions>(std::move(options));
  return Dataset(make_file_source_node(
      std::move(paths),
      [shared](const std::string& path) { return std::make_unique<CsvFileReader>(path, *shared); },
      "csv", "csv_dataset"));
}

}  // namespace est::data
