// HDF5: rows of named datasets read chunk by chunk (files written here with the HDF5 C API),
// type mapping, labels, resume, and missing or damaged input.
#include <doctest/doctest.h>
#include <hdf5.h>

#include <fstream>

#include "data/hdf5_reader.h"
#include "tests/data/test_util.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

template <class T>
void write_dataset(hid_t file, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                   const std::vector<T>& values) {
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t links = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(links, 1);
  hid_t dataset = H5Dcreate2(file, name, type, space, links, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  REQUIRE(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(dataset);
  H5Pclose(links);
  H5Sclose(space);
}

// images uint8 [10, 3, 2] (value = 6 * row + position), labels int64 [10] (row * 10),
// group/x float64 [10] (row / 2), short int16 [4].
std::string make_file() {
  std::string path = scratch_file("data.h5");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<uint8_t> images(60);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i);
  std::vector<int64_t> labels;
  std::vector<double> x;
  for (int i = 0; i < 10; ++i) {
    labels.push_back(i * 10);
    x.push_back(i / 2.0);
  }
  write_dataset(file, "images", H5T_NATIVE_UINT8, {10, 3, 2}, images);
  write_dataset(file, "labels", H5T_NATIVE_INT64, {10}, labels);
  write_dataset(file, "group/x", H5T_NATIVE_DOUBLE, {10}, x);
  write_dataset(file, "short", H5T_NATIVE_INT16, {4}, std::vector<int16_t>{-1, 2, -3, 4});
  H5Fclose(file);
  return path;
}

}  // namespace

TEST_CASE("hdf5_dataset yields rows across chunk boundaries with labels and mapped types") {
  std::string path = make_file();
  for (int64_t chunk : {1, 3, 4, 10, 64}) {
    CAPTURE(chunk);
    auto rows = drain(hdf5_dataset(
        path, {.features = {"images", "/group/x"}, .labels = "labels", .chunk_rows = chunk}));
    REQUIRE(rows.size() == 10);
    for (int64_t r = 0; r < 10; ++r) {
      const Element& e = rows[static_cast<size_t>(r)];
      CHECK(e.features.at("images").dtype() == DType::kU8);
      CHECK(e.features.at("images").shape() == Shape{3, 2});
      std::vector<int64_t> expected;
      for (int64_t k = 0; k < 6; ++k) expected.push_back(6 * r + k);
      CHECK(e.features.at("images").to_vector<int64_t>() == expected);
      CHECK(e.features.at("group/x").dtype() == DType::kF64);
      CHECK(e.features.at("group/x").item() == r / 2.0);
      CHECK(e.labels.dtype() == DType::kI64);
      CHECK(e.labels.item() == r * 10);
    }
  }
  auto shorts = drain(hdf5_dataset(path, {.features = {"short"}}));
  REQUIRE(shorts.size() == 4);
  CHECK(shorts[2].features.at("short").dtype() == DType::kI32);
  CHECK(shorts[2].features.at("short").item() == -3);
  est::testing::check_resume(
      hdf5_dataset(path, {.features = {"images"}, .labels = "labels", .chunk_rows = 3}),
      {0, 2, 3, 7});
  CHECK(drain(hdf5_dataset(path, {.features = {"images"}}).shard(3, 1)).size() == 3);
}

TEST_CASE("missing, mismatched and damaged HDF5 input is reported by name") {
  std::string path = make_file();
  std::string message = error_message<NotFoundError>([&] {
    drain(hdf5_dataset(path, {.features = {"images", "nope"}}));
  });
  CHECK(contains(message, "no dataset 'nope'"));
  CHECK(contains(message, path));
  message = error_message<InvalidArgumentError>([&] {
    drain(hdf5_dataset(path, {.features = {"images", "short"}}));
  });
  CHECK(contains(message, "'images' has 10"));
  CHECK(contains(message, "'short' has 4"));
  CHECK(contains(error_message<NotFoundError>(
                     [] { drain(hdf5_dataset("/nonexistent/x.h5", {.features = {"a"}})); }),
                 "/nonexistent/x.h5"));
  std::string fake = scratch_file("fake.h5");
  std::ofstream(fake) << "not hdf5 at all";
  CHECK(contains(
      error_message<DataLossError>([&] { drain(hdf5_dataset(fake, {.features = {"a"}})); }),
      "not an HDF5 file"));
  CHECK(contains(error_message<InvalidArgumentError>([] { hdf5_dataset("x.h5", {}); }),
                 "at least one"));
}
