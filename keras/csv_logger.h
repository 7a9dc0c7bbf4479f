// keras.callbacks.CSVLogger, Keras 2.x semantics (keras/callbacks.py CSVLogger): one row per
// epoch, written as Python's csv.DictWriter with the excel dialect writes it ("\r\n" line ends,
// fields holding the separator, a quote or a line break quoted): the header "epoch" then the
// epoch's log keys sorted (fixed by the first epoch), values as Python's str(float) prints
// them. append: add to an existing file, writing the header only when the file is empty; else
// the file is overwritten. When a callback stopped training, missing keys are "NA".
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "keras/callbacks.h"

namespace est::keras {

class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, std::string separator = ",", bool append = false);
  ~CSVLogger() override;

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  void write_row(const std::vector<std::string>& fields);

  std::string filename_;
  std::string separator_;
  bool append_;
  bool append_header_ = true;
  std::FILE* file_ = nullptr;
  std::optional<std::vector<std::string>> keys_;
  bool header_written_ = false;
};

// A double as Python's repr/str prints a float: shortest round trip, "1.0", "1e-05", "nan".
std::string python_float(double value);

}  // namespace est::keras
