// Strings (tf.string) through the data layer: tensor slices, batch, padded_batch, shuffle,
// memory and file caches, saved iterator positions, CSV string columns, and Example bytes_list
// features parsed as strings.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "data/csv.h"
#include "data/example.h"
#include "data/tfrecord.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::check_resume;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

std::vector<std::string> words(int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(std::string(static_cast<size_t>(i % 4), 'a' + static_cast<char>(i % 26)) +
                  std::to_string(i) + std::string(i % 3 == 0 ? 40 : 0, 'z'));  // some heap ones
  return out;
}

// The strings of every element's feature `name`, flattened in order.
std::vector<std::string> strings_of(const std::vector<Element>& elements, const std::string& name) {
  std::vector<std::string> out;
  for (const Element& e : elements)
    for (const std::string& s : e.features.at(name).to_vector<std::string>()) out.push_back(s);
  return out;
}

Dataset word_slices(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  return Dataset::from_tensor_slices({{"word", string_tensor(words(n))}}, Tensor::from_vector(ids));
}

}  // namespace

TEST_CASE("from_tensor_slices of strings yields string scalars; batch stacks them") {
  auto elements = drain(word_slices(5));
  REQUIRE(elements.size() == 5);
  CHECK(elements[3].features.at("word").dtype() == DType::kString);
  CHECK(elements[3].features.at("word").shape() == Shape{});
  CHECK(elements[3].features.at("word").to_vector<std::string>()[0] == words(5)[3]);

  auto batches = drain(word_slices(5).batch(2));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].features.at("word").shape() == Shape{2});
  CHECK(strings_of(batches, "word") == words(5));
  // Through a map (elements, not rows), the generic batching path.
  auto mapped = drain(word_slices(5).map([](Element e) { return e; }).batch(2));
  CHECK(strings_of(mapped, "word") == words(5));
  CHECK(tensor_bytes(elements[1].features.at("word")) == words(5)[1]);
}

TEST_CASE("shuffle and caches keep every string with its id") {
  const auto expected = words(40);
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    Dataset ds = word_slices(40);
    if (variant == 1) ds = ds.map([](Element e) { return e; }).cache();
    if (variant == 2) ds = ds.map([](Element e) { return e; }).cache(scratch_file("words.cache"));
    ds = ds.shuffle(16, 7).batch(8).repeat(2);
    auto batches = drain(ds);
    std::vector<std::string> seen;
    for (const Element& batch : batches) {
      auto ids = batch.labels.to_vector<int64_t>();
      auto batch_words = batch.features.at("word").to_vector<std::string>();
      for (size_t i = 0; i < ids.size(); ++i)
        CHECK(batch_words[i] == expected[static_cast<size_t>(ids[i])]);
      seen.insert(seen.end(), batch_words.begin(), batch_words.end());
    }
    CHECK(seen.size() == 80);
    std::sort(seen.begin(), seen.end());
    std::vector<std::string> twice = expected;
    twice.insert(twice.end(), expected.begin(), expected.end());
    std::sort(twice.begin(), twice.end());
    CHECK(seen == twice);
  }
}

TEST_CASE("iterator positions over strings resume exactly") {
  check_resume(word_slices(30).shuffle(10, 3).batch(4).repeat(2), {1, 5, 9});
  check_resume(
      word_slices(30).map([](Element e) { return e; }).cache().shuffle(10, 3).batch(4).repeat(2),
      {2, 8, 12});
  // A shuffle buffer of string elements (not rows) is saved with its strings.
  check_resume(word_slices(30).map([](Element e) { return e; }).shuffle(10, 5).repeat(2), {3, 33});
  Element element({{"s", string_tensor({"", std::string("\0x", 2), std::string(300, 'q')})}});
  Element back = deserialize_element(serialize_element(element), "test");
  CHECK(back.features.at("s").to_vector<std::string>() ==
        element.features.at("s").to_vector<std::string>());
}

TEST_CASE("padded_batch pads strings with the empty string") {
  std::vector<Element> elements;
  elements.emplace_back(Features{{"w", string_tensor({"a"})}});
  elements.emplace_back(Features{{"w", string_tensor({"b", "c", "d"})}});
  Dataset ds = Dataset::from_generator([elements] {
    return [elements, i = size_t{0}]() mutable -> std::optional<Element> {
      if (i == elements.size()) return std::nullopt;
      return elements[i++];
    };
  });
  auto batches = drain(ds.padded_batch(2));
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].features.at("w").shape() == Shape{2, 3});
  CHECK(batches[0].features.at("w").to_vector<std::string>() ==
        std::vector<std::string>{"a", "", "", "b", "c", "d"});
  auto ragged = drain(ds.ragged_batch(2, {"w"}));
  CHECK(ragged[0].features.at("w").to_vector<std::string>() ==
        std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("CSV string columns are string scalars, with defaults for empty fields") {
  std::string path = scratch_file("strings.csv");
  std::ofstream(path) << "city,code,population\n"
                         "\"Paris, FR\",75,2100000\n"
                         ",13,\n";
  CsvOptions options{.columns = {{.dtype = DType::kString, .default_text = "unknown"},
                                 {.dtype = DType::kString},
                                 {.dtype = DType::kI64, .default_value = 0.0}}};
  auto elements = drain(csv_dataset({path}, options).batch(2));
  REQUIRE(elements.size() == 1);
  CHECK(elements[0].features.at("city").to_vector<std::string>() ==
        std::vector<std::string>{"Paris, FR", "unknown"});
  CHECK(elements[0].features.at("code").to_vector<std::string>() ==
        std::vector<std::string>{"75", "13"});
}

TEST_CASE("bytes_list features parse as strings, with string defaults") {
  std::string record = ExampleBuilder()
                           .add_bytes("tags", {"red", "", std::string("\xff\x00", 2)})
                           .add_bytes("name", {"ann"})
                           .serialize();
  FeatureSpecs specs{{"tags", FixedLenFeature{.shape = {3}, .dtype = DType::kString}},
                     {"name", FixedLenFeature{.shape = {}, .dtype = DType::kString}},
                     {"city", FixedLenFeature{.shape = {2},
                                              .dtype = DType::kString,
                                              .default_strings = std::vector<std::string>{"x"}}}};
  auto parsed = parse_single_example(record, specs);
  CHECK(parsed.at("tags").to_vector<std::string>() ==
        std::vector<std::string>{"red", "", std::string("\xff\x00", 2)});
  CHECK(parsed.at("name").shape() == Shape{});
  CHECK(parsed.at("name").to_vector<std::string>()[0] == "ann");
  CHECK(parsed.at("city").to_vector<std::string>() == std::vector<std::string>{"x", "x"});
  CHECK(contains(error_message<InvalidArgumentError>([&] {
                   parse_single_example(record, {{"nick", FixedLenFeature{{}, DType::kString}}});
                 }),
                 "no default_strings"));
  // A string-typed record parses like a uint8 one (from_tensor_slices of serialised Examples).
  auto via_strings = drain(
      Dataset::from_tensor_slices(string_tensor({record, record})).map(example_parser(specs)));
  REQUIRE(via_strings.size() == 2);
  CHECK(via_strings[1].features.at("name").to_vector<std::string>()[0] == "ann");
  // Strings round-trip through serialize_example.
  auto again = parse_single_example(serialize_example({{"tags", parsed.at("tags")}}),
                                    {{"tags", FixedLenFeature{{3}, DType::kString}}});
  CHECK(again.at("tags").to_vector<std::string>() == parsed.at("tags").to_vector<std::string>());
}
