// Checkpoint files: round trips of every dtype and shape, blobs, metadata, listing, single
// variables, and the errors for bundles the format cannot hold and files that are not
// checkpoints.
#include <hdf5.h>

#include <cmath>
#include <limits>

#include "checkpoint/file_util.h"
#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

TEST_CASE("checkpoint file round trip: every dtype, scalars, empty tensors, blobs") {
  TempDir dir;
  TensorBundle bundle = sample_bundle(123456789012LL);
  // Bit patterns a lossy path would change: NaN payload, infinities, -0, subnormals, extremes.
  bundle.add_variable(
      "special/f32",
      Tensor::from_vector<float>(
          {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
           -std::numeric_limits<float>::infinity(), -0.0f, std::numeric_limits<float>::denorm_min(),
           std::numeric_limits<float>::max()}));
  bundle.add_variable("special/f64", Tensor::from_vector<double>(
                                         {std::numeric_limits<double>::lowest(),
                                          std::numeric_limits<double>::denorm_min(), -0.0}));
  bundle.add_variable("special/i64",
                      Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(),
                                                    std::numeric_limits<int64_t>::max()}));
  bundle.add_variable("special/i32",
                      Tensor::from_vector<int32_t>({std::numeric_limits<int32_t>::min(),
                                                    std::numeric_limits<int32_t>::max()}));
  bundle.add_variable("scalar/f32", Tensor::scalar(2.5));
  bundle.add_variable("scalar/bool", Tensor::scalar(1, DType::kBool));
  bundle.add_variable("empty/rows", Tensor::zeros({0, 3}));
  bundle.add_variable("empty/bool", Tensor::zeros({0}, DType::kBool));
  bundle.add_variable("deep/a/b/c/d", iota<float>({2, 1, 3, 1}, 1, 1));
  bundle.add_blob("empty", "");
  std::string binary(256, '\0');
  for (int i = 0; i < 256; ++i) binary[static_cast<size_t>(i)] = static_cast<char>(i);
  bundle.add_blob("binary/all_bytes", binary);

  const std::string path = dir / "model.ckpt-1.h5";
  save(path, bundle, {.timestamp = 1700000000});
  TensorBundle loaded = load(path);
  check_same_bundle(bundle, loaded);
  CHECK(loaded.find("scalar/f32")->value.rank() == 0);
  CHECK(loaded.find("empty/rows")->value.shape() == Shape{0, 3});
  CHECK(loaded.find("mask")->value.dtype() == DType::kBool);
  CHECK(loaded.find("image/pixels")->value.dtype() == DType::kU8);
  // Only the final file is left: the temporary was renamed.
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"model.ckpt-1.h5"});

  // Variables first, then slots, each sorted by name.
  std::vector<TensorInfo> listed = list_variables(path);
  REQUIRE(listed.size() == bundle.tensors.size());
  CHECK(listed.front().name == "batch_norm/moving_mean");
  CHECK(listed[listed.size() - 2].name == "dense/kernel/Adam");
  CHECK(listed.back().name == "dense/kernel/Adam_1");
  CHECK(listed.back().kind == EntryKind::kSlot);

  CheckpointInfo info = read_info(path);
  CHECK(info.global_step == 123456789012LL);
  CHECK(info.format_version == 1);
  CHECK(info.framework_version == "0.1.0");
  CHECK(info.creation_time == "2023-11-14T22:13:20Z");  // date -u -d @1700000000
  CHECK(info.creation_timestamp == 1700000000.0);
  REQUIRE(info.blobs.size() == 4);
  CHECK(info.blobs[0].name == "binary/all_bytes");
  CHECK(info.blobs[0].bytes == 256);
}

TEST_CASE("list_variables and load_variable") {
  TempDir dir;
  TensorBundle bundle = sample_bundle(7);
  const std::string path = dir / "model.ckpt-7.h5";
  save(path, bundle);

  bool found_kernel = false;
  for (const TensorInfo& info : list_variables(path)) {
    if (info.name != "dense/kernel") continue;
    found_kernel = true;
    CHECK(info.shape == Shape{3, 4});
    CHECK(info.dtype == DType::kF32);
    CHECK(info.trainable);
    CHECK(info.kind == EntryKind::kVariable);
  }
  CHECK(found_kernel);

  Tensor kernel = load_variable(path, "dense/kernel");
  CHECK(same_bytes(kernel, bundle.find("dense/kernel")->value));
  CHECK(kernel.at({2, 3}) == doctest::Approx(11 * 0.5));
  Tensor slot = load_variable(path, "dense/kernel/Adam");
  CHECK(same_bytes(slot, bundle.find("dense/kernel/Adam")->value));
  try {
    load_variable(path, "dense/kernel/Momentum");
    FAIL("expected NotFoundError");
  } catch (const NotFoundError& error) {
    CHECK(std::string(error.what()).find("\"dense/kernel/Momentum\"") != std::string::npos);
    CHECK(std::string(error.what()).find(path) != std::string::npos);
  }
  CHECK_THROWS_AS(load_variable(path, "dense"), NotFoundError);  // a group, not a tensor
  CHECK_THROWS_AS(load_variable(path, "dense/kernel/Adam/x"), NotFoundError);
  CHECK_THROWS_AS(load(dir / "model.ckpt-8.h5"), NotFoundError);
}

TEST_CASE("bundles the format cannot hold are rejected before anything is written") {
  TempDir dir;
  const std::string path = dir / "model.ckpt-1.h5";
  auto rejects = [&](TensorBundle bundle, const std::string& fragment) {
    try {
      save(path, bundle);
      FAIL("expected InvalidArgumentError mentioning ", fragment);
    } catch (const InvalidArgumentError& error) {
      CHECK_MESSAGE(std::string(error.what()).find(fragment) != std::string::npos, error.what());
    }
    CHECK(list_dir(dir.path()).empty());
  };
  rejects(TensorBundle().add_variable("a", Tensor::ones({1})).add_variable("a", Tensor::ones({1})),
          "\"a\" appears twice");
  rejects(TensorBundle().add_variable("a//b", Tensor::ones({1})), "empty component");
  rejects(TensorBundle().add_variable("/a", Tensor::ones({1})), "empty component");
  rejects(TensorBundle().add_variable("a/../b", Tensor::ones({1})), "\"..\"");
  rejects(TensorBundle().add_variable("", Tensor::ones({1})), "is empty");
  rejects(TensorBundle().add_variable("a", Tensor()), "undefined");
  rejects(TensorBundle()
              .add_variable("dense/kernel", Tensor::ones({1}))
              .add_variable("dense/kernel/Adam", Tensor::ones({1})),
          "Mark \"dense/kernel/Adam\" as an optimizer slot");
  rejects(TensorBundle().add_blob("x", "1").add_blob("x", "2"), "blob \"x\" appears twice");
  // The same names are fine once the slot is a slot.
  save(path, TensorBundle()
                 .add_variable("dense/kernel", Tensor::ones({1}))
                 .add_slot("dense/kernel/Adam", Tensor::zeros({1})));
  CHECK(load_variable(path, "dense/kernel/Adam").item() == 0.0);
}

TEST_CASE("files that are not checkpoints") {
  TempDir dir;
  const std::string text = dir / "notes.h5";
  std::ofstream(text) << "not hdf5 at all";
  CHECK_THROWS_AS(load(text), DataLossError);
  const std::string empty = dir / "empty.h5";
  std::ofstream{empty};
  CHECK_THROWS_AS(load(empty), DataLossError);

  // A valid HDF5 file without the checkpoint attributes.
  const std::string plain = dir / "plain.h5";
  hid_t file = H5Fcreate(plain.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(file >= 0);
  H5Fclose(file);
  try {
    load(plain);
    FAIL("expected InvalidArgumentError");
  } catch (const InvalidArgumentError& error) {
    CHECK(std::string(error.what()).find("not an est checkpoint") != std::string::npos);
  }

  // A directory without a state file.
  CHECK_THROWS_AS(load(dir.str()), NotFoundError);

  // Saving below a regular file fails cleanly.
  CHECK_THROWS_AS(save(text + "/model.ckpt-1.h5", sample_bundle(1)), Error);
}

TEST_CASE("RNG state blobs: little-endian words, checked length") {
  std::string bytes = encode_generator_state({1, 0, 0, 0x0102030405060708ULL});
  REQUIRE(bytes.size() == 32);
  CHECK(bytes[0] == 1);
  CHECK(bytes[1] == 0);
  CHECK(bytes[24] == 0x08);
  CHECK(bytes[31] == 0x01);
  CHECK(decode_generator_state(bytes) == std::array<uint64_t, 4>{1, 0, 0, 0x0102030405060708ULL});
  CHECK_THROWS_AS(decode_generator_state(bytes.substr(1)), DataLossError);
}

TEST_CASE("durable file helpers") {
  TempDir dir;
  write_file_durably(dir.path() / "a.txt", "hello");
  CHECK(read_text(dir / "a.txt") == "hello");
  write_file_durably(dir.path() / "a.txt", "bye");
  CHECK(read_text(dir / "a.txt") == "bye");
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"a.txt"});
  CHECK(is_temporary_name(temporary_path_for(dir.path() / "model.ckpt-3.h5").filename().string()));
  CHECK_FALSE(is_temporary_name("model.ckpt-3.h5"));
  CHECK(temporary_owner(temporary_path_for(dir.path() / "model.ckpt-3.h5").filename().string()) ==
        ::getpid());
  CHECK(temporary_owner("model.ckpt-3.h5.tmp-4242-17") == 4242);
  CHECK_FALSE(temporary_owner("model.ckpt-3.h5").has_value());
  CHECK_FALSE(temporary_owner("model.ckpt-3.h5.tmp-abc-1").has_value());
  CHECK_FALSE(temporary_owner("model.ckpt-3.h5.tmp-12").has_value());
}

TEST_CASE("stale temporaries of dead processes are removed, a live process's are kept") {
  TempDir dir;
  LiveChild live;
  const int dead = dead_pid();
  REQUIRE_FALSE(process_alive(dead));
  REQUIRE(process_alive(live.pid()));
  const std::string dead_checkpoint = fmt::format("model.ckpt-3.h5.tmp-{}-0", dead);
  const std::string dead_state = fmt::format("checkpoint.tmp-{}-1", dead);
  const std::string live_checkpoint = fmt::format("model.ckpt-4.h5.tmp-{}-0", live.pid());
  const std::string own_checkpoint =
      temporary_path_for(dir.path() / "model.ckpt-5.h5").filename().string();
  const std::string other_prefix = fmt::format("other.tmp-{}-1", dead);
  for (const std::string& name : {dead_checkpoint, dead_state, live_checkpoint, own_checkpoint,
                                  other_prefix, std::string("model.ckpt-6.h5.tmp-x-0")})
    std::ofstream(dir / name) << "partial";

  CHECK(remove_stale_temporaries(dir.path(), "model.ckpt") == 1);
  CHECK_FALSE(fs::exists(dir / dead_checkpoint));
  CHECK(fs::exists(dir / live_checkpoint));            // another process's save in flight
  CHECK(fs::exists(dir / own_checkpoint));             // this process's
  CHECK(fs::exists(dir / other_prefix));               // another prefix
  CHECK(fs::exists(dir / "model.ckpt-6.h5.tmp-x-0"));  // no pid: not ours to judge

  // A new manager on the directory (what training opens) does the same for both prefixes.
  { CheckpointManager manager({.directory = dir.str(), .async = false}); }
  CHECK_FALSE(fs::exists(dir / dead_state));
  CHECK(fs::exists(dir / live_checkpoint));
}

namespace {

// The file address of an object's header (HDF5 1.10's H5O_info_t.addr; a token from 1.12 on).
uint64_t header_address(hid_t object) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  REQUIRE(H5Oget_info3(object, &info, H5O_INFO_BASIC) >= 0);
  haddr_t address = HADDR_UNDEF;
  REQUIRE(H5VLnative_token_to_addr(object, info.token, &address) >= 0);
  return address;
#else
  H5O_info_t info{};
  REQUIRE(H5Oget_info2(object, &info, H5O_INFO_BASIC) >= 0);
  return info.addr;
#endif
}

}  // namespace

TEST_CASE("a large checkpoint keeps every header before the first tensor's data") {
  // A restore opening a file that is not cached reads its metadata from one place (FORMAT.md).
  TempDir dir;
  TensorBundle bundle;
  bundle.global_step = 3;
  for (int i = 0; i < 24; ++i)
    bundle.add_variable(fmt::format("layer_{}/kernel", i), iota<float>({64, 1024}, i, 0.5f),
                        i % 3 != 0);
  bundle.add_blob("iterator", std::string(100, 'x'));
  const std::string path = dir / "model.ckpt-3.h5";
  save(path, bundle);

  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  uint64_t last_header = 0, first_data = UINT64_MAX;
  std::vector<std::string> datasets;
  for (const TensorEntry& entry : bundle.tensors) datasets.push_back("/variables/" + entry.name);
  datasets.push_back("/state/iterator");
  for (const std::string& name : datasets) {
    hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    REQUIRE(dataset >= 0);
    last_header = std::max(last_header, header_address(dataset));
    if (name.rfind("/variables/", 0) == 0)
      first_data = std::min<uint64_t>(first_data, H5Dget_offset(dataset));
    H5Dclose(dataset);
  }
  H5Fclose(file);
  CHECK(last_header < first_data);
  check_same_bundle(bundle, load(path));  // and it reads back the same
}
