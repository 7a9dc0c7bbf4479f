// CSV text files as datasets, as tf.data.experimental.make_csv_dataset / CsvDataset: a header
// naming the columns, per-column types and defaults, quoted fields, skipped leading lines.
//
// Each record becomes an element whose features are scalar tensors named after the columns
// (text columns: a string scalar, or uint8 [length] bytes for kU8); `label_name` moves one column
// to the labels. A record with the wrong number of fields, a field that does not parse, or an empty
// field without a default is an InvalidArgumentError naming the file, line and column.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/file_stream.h"

namespace est::data {

struct CsvColumn {
  std::string name;           // empty: the header's name, or "column<i>" without a header
  DType dtype = DType::kF32;  // kF32, kF64, kI32, kI64, kString (tf.string), kU8 (text as bytes)
  std::optional<double> default_value;      // for empty fields; none: the field is required
  std::optional<std::string> default_text;  // the same for kString / kU8 columns (else "")
  // The same for kI64 / kI32 columns, exact (a double holds integers exactly only up to 2^53;
  // TF's decode_csv record_defaults are of the column's dtype). Not with default_value.
  std::optional<int64_t> default_int64;
};

struct CsvOptions {
  std::vector<CsvColumn> columns;  // empty: every header column as a required float32
  bool header = true;              // the first line (after `skip`) names the columns
  int64_t skip = 0;                // lines dropped at the start of each file, before the header
  char field_delim = ',';
  bool use_quote_delim = true;  // "..." may hold delimiters, newlines and "" for a quote
  std::string na_value;         // a field equal to this counts as empty
  std::vector<std::string> select_columns;  // keep only these; empty: all
  std::string label_name;                   // this column becomes the labels; empty: none
  Compression compression = Compression::kNone;
};

Dataset csv_dataset(std::vector<std::string> paths, CsvOptions options = {});

}  // namespace est::data
