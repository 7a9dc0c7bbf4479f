// CSV: header, skipped lines, types and defaults, quoting (delimiters, "" and newlines inside
// quotes), CRLF, selection, labels, compression, resume, and errors naming file, line, column.
#include <doctest/doctest.h>

#include <fstream>

#include "data/csv.h"
#include "data/tfrecord.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

std::string write_csv(const std::string& name, const std::string& text) {
  std::string path = scratch_file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

CsvOptions typed_options() {
  return {.columns = {{.name = "", .dtype = DType::kF32, .default_value = -1.0},
                      {.name = "", .dtype = DType::kI64, .default_value = 9.0},
                      {.name = "", .dtype = DType::kU8},
                      {.name = "", .dtype = DType::kI32}},
          .skip = 1,
          .label_name = "label"};
}

}  // namespace

TEST_CASE("csv_dataset reads typed columns with defaults, quotes and the header's names") {
  std::string path = write_csv("typed.csv",
                               "# exported 2024-01-01\n"
                               "a,b,name,label\n"
                               "1.5,2,\"x, y\",0\n"
                               ",3,\"say \"\"hi\"\"\",1\r\n"
                               "\n"
                               "2.5e1,,\"two\nlines\",2\n"
                               "-4,-5,plain,3");  // no newline at the end
  auto rows = drain(csv_dataset({path}, typed_options()));
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].features.at("a").dtype() == DType::kF32);
  CHECK(rows[0].features.at("a").item() == 1.5);
  CHECK(rows[0].features.at("b").item() == 2);
  CHECK(tensor_bytes(rows[0].features.at("name")) == "x, y");
  CHECK(rows[0].labels.dtype() == DType::kI32);
  CHECK(rows[0].labels.item() == 0);
  CHECK_FALSE(rows[0].features.count("label"));
  CHECK(rows[1].features.at("a").item() == -1.0);  // empty: the default
  CHECK(tensor_bytes(rows[1].features.at("name")) == "say \"hi\"");
  CHECK(rows[2].features.at("a").item() == 25.0);
  CHECK(rows[2].features.at("b").item() == 9);
  CHECK(tensor_bytes(rows[2].features.at("name")) == "two\nlines");
  CHECK(rows[3].features.at("b").item() == -5);
  CHECK(rows[3].labels.item() == 3);
}

TEST_CASE("csv_dataset without a header, with selected columns, NA values and GZIP") {
  std::string path = write_csv("plain.csv", "1;2;3\n4;NA;6\n");
  CsvOptions options{.columns = {{.name = "x"}, {.name = "y", .default_value = 0.0}, {.name = "z"}},
                     .header = false,
                     .field_delim = ';',
                     .na_value = "NA",
                     .select_columns = {"y", "z"}};
  auto rows = drain(csv_dataset({path}, options));
  REQUIRE(rows.size() == 2);
  CHECK_FALSE(rows[0].features.count("x"));
  CHECK(rows[1].features.at("y").item() == 0.0);
  CHECK(rows[1].features.at("z").item() == 6.0);

  // Every header column as float32 when no columns are configured; a GZIP file.
  std::string gz = scratch_file("compressed.csv.gz");
  {
    OutputStream out(gz, Compression::kGzip);
    out.write("p,q\n1,2\n3,4\n");
  }
  auto compressed = drain(csv_dataset({gz}, {.compression = Compression::kGzip}));
  REQUIRE(compressed.size() == 2);
  CHECK(compressed[1].features.at("q").item() == 4.0);
  CHECK(compressed[1].features.at("q").dtype() == DType::kF32);
}

TEST_CASE("bad CSV records are InvalidArgumentErrors naming the file, line and column") {
  std::string path = write_csv("bad_count.csv", "a,b,c\n1,2,3\n4,5\n");
  std::string message = error_message<InvalidArgumentError>([&] { drain(csv_dataset({path})); });
  CHECK(contains(message, path));
  CHECK(contains(message, "line 3"));
  CHECK(contains(message, "expected 3 fields, found 2"));

  path = write_csv("bad_number.csv", "a,b\n1,2\n3,x7\n");
  message = error_message<InvalidArgumentError>([&] { drain(csv_dataset({path})); });
  CHECK(contains(message, "line 3, column 'b': cannot parse 'x7' as float32"));

  path = write_csv("bad_empty.csv", "a,b\n1,\n");
  CHECK(contains(error_message<InvalidArgumentError>([&] { drain(csv_dataset({path})); }),
                 "column 'b': the field is empty and the column has no default_value"));

  path = write_csv("bad_quote.csv", "a,b\n\"1,2\n");
  CHECK(contains(error_message<InvalidArgumentError>([&] { drain(csv_dataset({path})); }),
                 "quoted field is not closed"));

  path = write_csv("bad_int.csv", "a\n2.5\n");
  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { drain(csv_dataset({path}, {.columns = {{.dtype = DType::kI64}}})); }),
                 "cannot parse '2.5' as int64"));

  CHECK(contains(error_message<InvalidArgumentError>(
                     [&] { drain(csv_dataset({path}, {.label_name = "missing"})); }),
                 "label column 'missing'"));
  CHECK(
      contains(error_message<NotFoundError>([] { drain(csv_dataset({"/nonexistent/data.csv"})); }),
               "/nonexistent/data.csv"));
  CHECK(contains(
      error_message<InvalidArgumentError>([] { csv_dataset({"x.csv"}, {.header = false}); }),
      "columns"));
}

TEST_CASE("csv_dataset over several files resumes at any record") {
  std::string one = write_csv("resume1.csv", "a,b\n1,\"x\ny\"\n2,z\n3,w\n");
  std::string two = write_csv("resume2.csv", "a,b\n4,v\n5,\"u,t\"\n");
  CsvOptions options{.columns = {{.dtype = DType::kI64}, {.dtype = DType::kU8}}};
  auto ds = csv_dataset({one, two}, options);
  auto rows = drain(ds);
  REQUIRE(rows.size() == 5);
  for (int64_t i = 0; i < 5; ++i)
    CHECK(rows[static_cast<size_t>(i)].features.at("a").item() == i + 1);
  est::testing::check_resume(ds, {0, 1, 2, 3, 4});
  // Line numbers stay right after a restore: the bad record is on line 4 of the file.
  std::string bad = write_csv("resume_bad.csv", "a,b\n1,\"x\ny\"\n2,z,extra\n");
  auto it = csv_dataset({bad}, options).iterator();
  it.next();
  auto restored = csv_dataset({bad}, options).iterator();
  restored.restore_state(it.save_state());
  CHECK(contains(error_message<InvalidArgumentError>([&] { restored.next(); }), "line 4"));
}

TEST_CASE("csv_dataset: an int64 default above 2^53 is exact through default_int64") {
  // TF's decode_csv takes record_defaults of the column's dtype: int64 defaults are exact. A
  // double cannot hold 2^53 + 1 (it rounds to 2^53), so default_int64 carries it.
  constexpr int64_t kBig = (int64_t{1} << 53) + 1;
  std::string path = write_csv("big_default.csv", "id,small\n,\n7,8\n");
  CsvOptions options{.columns = {{.name = "", .dtype = DType::kI64, .default_int64 = kBig},
                                 {.name = "", .dtype = DType::kI32, .default_int64 = -3}}};
  auto rows = drain(csv_dataset({path}, options));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].features.at("id").data<int64_t>()[0] == kBig);
  CHECK(rows[0].features.at("small").data<int32_t>()[0] == -3);
  CHECK(rows[1].features.at("id").data<int64_t>()[0] == 7);

  auto error_for = [&](CsvColumn column) {
    return error_message<InvalidArgumentError>([&] {
      drain(csv_dataset({path}, {.columns = {column, {}}}));
    });
  };
  CHECK(contains(error_for({.name = "id", .dtype = DType::kF32, .default_int64 = 1}),
                 "default_int64 is for int64 and int32 columns"));
  CHECK(contains(
      error_for({.name = "id", .dtype = DType::kI64, .default_value = 1.0, .default_int64 = 1}),
      "both default_value and default_int64"));
  CHECK(contains(error_for({.name = "id", .dtype = DType::kI32, .default_int64 = kBig}),
                 "does not fit its dtype int32"));
}
