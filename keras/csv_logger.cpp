// keras.callbacks.CSVLogger (Keras 2.x); see csv_logger.h.
#include "keras/csv_logger.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "keras/model.h"
#include "ops/error.h"

namespace est::keras {

std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);  // shortest round trip, as Python's repr
  // Python writes an integral float with ".0".
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

CSVLogger::CSVLogger(std::string filename, std::string separator, bool append)
    : filename_(std::move(filename)), separator_(std::move(separator)), append_(append) {
  if (filename_.empty())
    throw InvalidArgumentError("CSVLogger: filename is empty; give the CSV file to write");
  if (separator_.size() != 1)
    throw InvalidArgumentError(fmt::format(
        "CSVLogger: separator \"{}\" must be a 1-character string (Python's csv delimiter)",
        separator_));
}

CSVLogger::~CSVLogger() {
  if (file_ != nullptr) std::fclose(file_);
}

void CSVLogger::on_train_begin(const Logs&) {
  append_header_ = true;
  if (append_) {
    if (std::FILE* existing = std::fopen(filename_.c_str(), "r")) {
      append_header_ = std::fgetc(existing) == EOF;  // a non-empty first line: no header
      std::fclose(existing);
    }
  }
  if (file_ != nullptr) std::fclose(file_);
  file_ = std::fopen(filename_.c_str(), append_ ? "ab" : "wb");
  if (file_ == nullptr)
    throw InvalidArgumentError(
        fmt::format("CSVLogger: cannot open {} for writing: {}", filename_, std::strerror(errno)));
  keys_.reset();
  header_written_ = false;
}

void CSVLogger::write_row(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += separator_;
    const std::string& field = fields[i];
    if (field.find_first_of(separator_ + "\"\r\n") == std::string::npos) {
      line += field;
      continue;
    }
    line += '"';
    for (char c : field) line += c == '"' ? std::string("\"\"") : std::string(1, c);
    line += '"';
  }
  line += "\r\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw InvalidArgumentError(
        fmt::format("CSVLogger: cannot write {}: {}", filename_, std::strerror(errno)));
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (file_ == nullptr) return;
  if (!keys_) {
    keys_.emplace();
    for (const auto& [key, value] : logs) keys_->push_back(key);  // a map: sorted
  }
  if (!header_written_) {
    header_written_ = true;
    if (append_header_) {
      std::vector<std::string> header{"epoch"};
      header.insert(header.end(), keys_->begin(), keys_->end());
      write_row(header);
    }
  }
  std::vector<std::string> row{std::to_string(epoch)};
  for (const auto& key : *keys_) {
    auto it = logs.find(key);
    if (it != logs.end())
      row.push_back(python_float(it->second));
    else if (model() != nullptr && model()->stop_training)
      row.push_back("NA");
    else  // DictWriter writes a missing key as its restval, ""
      row.emplace_back();
  }
  write_row(row);
}

void CSVLogger::on_train_end(const Logs&) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace est::keras
