// Damaged files: truncation and flipped bits give DataLossError naming the file (and the
// variable), restore falls back to the previous checkpoint with a warning, and the bad file
// is left in place.
#include <hdf5.h>

#include <algorithm>
#include <random>

#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

// Byte offset of a dataset's raw data in the file, read through HDF5 directly.
int64_t data_offset(const std::string& file, const std::string& dataset) {
  hid_t handle = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(handle >= 0);
  hid_t data = H5Dopen2(handle, dataset.c_str(), H5P_DEFAULT);
  REQUIRE(data >= 0);
  haddr_t offset = H5Dget_offset(data);
  H5Dclose(data);
  H5Fclose(handle);
  REQUIRE(offset != HADDR_UNDEF);
  return static_cast<int64_t>(offset);
}

// Byte offset of the data of the tensor stored last in the file (read last by a restore).
int64_t last_tensor_offset(const std::string& file) {
  int64_t last = -1;
  for (const TensorInfo& tensor : list_variables(file)) {
    const std::string group = tensor.kind == EntryKind::kVariable ? "/variables/" : "/slots/";
    last = std::max(last, data_offset(file, group + tensor.name));
  }
  REQUIRE(last >= 0);
  return last;
}

void flip_bit(const std::string& file, int64_t byte, int bit) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(byte);
  char value = 0;
  stream.read(&value, 1);
  value = static_cast<char>(value ^ (1 << bit));
  stream.seekp(byte);
  stream.write(&value, 1);
}

// Two checkpoints (steps 1 and 2) in a fresh directory, through the manager.
void save_two(const TempDir& dir) {
  CheckpointManager manager({.directory = dir.str(), .async = false});
  manager.save(sample_bundle(1, 1));
  manager.save(sample_bundle(2, 2));
}

std::string what_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const DataLossError& error) {
    return error.what();
  }
  FAIL("expected DataLossError");
  return "";
}

void check_falls_back_to_step_1(const TempDir& dir) {
  LogCapture log;
  TensorBundle model = sample_bundle(0, 50);
  RestoreResult result = restore_into(dir.str(), model);
  CHECK(result.path == dir / "model.ckpt-1.h5");
  CHECK(result.skipped == std::vector<std::string>{dir / "model.ckpt-2.h5"});
  check_same_bundle(sample_bundle(1, 1), model);
  std::vector<std::string> warnings = log.warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("Checkpoint model.ckpt-2.h5 is unreadable") != std::string::npos);
  CHECK(warnings[0].find("falling back to model.ckpt-1.h5") != std::string::npos);
  CHECK(fs::exists(dir / "model.ckpt-2.h5"));  // never deleted
}

}  // namespace

TEST_CASE("a truncated checkpoint is DataLossError and restore falls back") {
  TempDir dir;
  save_two(dir);
  const std::string newest = dir / "model.ckpt-2.h5";
  const auto size = static_cast<int64_t>(fs::file_size(newest));
  for (int64_t keep : {int64_t{0}, int64_t{7}, int64_t{100}, size / 2, size - 1}) {
    CAPTURE(keep);
    fs::resize_file(newest, static_cast<uintmax_t>(keep));
    std::string message = what_of([&] { load(newest); });
    CHECK(message.find(newest) != std::string::npos);
    CHECK_THROWS_AS(verify(newest), DataLossError);
    check_falls_back_to_step_1(dir);
    CHECK(fs::file_size(newest) == static_cast<uintmax_t>(keep));
  }
}

TEST_CASE("a flipped bit in a variable's data fails its checksum and restore falls back") {
  TempDir dir;
  save_two(dir);
  const std::string newest = dir / "model.ckpt-2.h5";
  flip_bit(newest, data_offset(newest, "/variables/dense/kernel") + 5, 3);
  std::string message = what_of([&] { load(newest); });
  CHECK(message.find(newest) != std::string::npos);
  CHECK(message.find("variable \"dense/kernel\" fails its checksum") != std::string::npos);
  CHECK_THROWS_AS(load_variable(newest, "dense/kernel"), DataLossError);
  CHECK(load_variable(newest, "dense/bias").at({0}) == doctest::Approx(1.0));  // others intact
  check_falls_back_to_step_1(dir);

  // Blobs and slots are covered too.
  TempDir other;
  save_two(other);
  flip_bit(other / "model.ckpt-2.h5", data_offset(other / "model.ckpt-2.h5", "/state/iterator"), 0);
  CHECK(what_of([&] { load(other / "model.ckpt-2.h5"); }).find("blob \"iterator\"") !=
        std::string::npos);
  flip_bit(other / "model.ckpt-1.h5",
           data_offset(other / "model.ckpt-1.h5", "/slots/dense/kernel/Adam") + 47, 7);
  CHECK(what_of([&] { load(other / "model.ckpt-1.h5"); }).find("slot \"dense/kernel/Adam\"") !=
        std::string::npos);

  // With every checkpoint damaged, restore gives up with DataLossError and deletes nothing.
  // The one pass had read into the model what lay before the damaged slot (and the slot): the
  // error names those tensors; the others keep their values.
  LogCapture log;
  TensorBundle model = sample_bundle(0, 50);
  std::string all = what_of([&] { restore_into(other.str(), model); });
  CHECK(all.find("model.ckpt-2.h5") != std::string::npos);
  CHECK(all.find("model.ckpt-1.h5") != std::string::npos);
  CHECK(all.find("were already read from a damaged checkpoint") != std::string::npos);
  CHECK(all.find("\"dense/kernel/Adam\"") != std::string::npos);
  CHECK(log.warnings().size() == 2);
  CHECK(log.warnings()[1].find("no earlier checkpoint is left") != std::string::npos);
  const TensorBundle initial = sample_bundle(0, 50);
  int named = 0;
  for (const TensorEntry& entry : initial.tensors) {
    if (all.find(fmt::format("\"{}\"", entry.name)) != std::string::npos) {
      ++named;
    } else {
      CAPTURE(entry.name);
      CHECK(same_bytes(model.find(entry.name)->value, entry.value));  // not read: untouched
    }
  }
  CHECK(named >= 1);
  CHECK(fs::exists(other / "model.ckpt-1.h5"));
  CHECK(fs::exists(other / "model.ckpt-2.h5"));

  // verify_first checks every checksum before writing: the model is left exactly as it was.
  TensorBundle kept = sample_bundle(0, 50);
  std::string verified = what_of([&] { restore_into(other.str(), kept, {.verify_first = true}); });
  CHECK(verified.find("model.ckpt-1.h5") != std::string::npos);
  CHECK(verified.find("were already read") == std::string::npos);
  check_same_bundle(sample_bundle(0, 50), kept);  // untouched
}

TEST_CASE("a fallback rewrites what a damaged checkpoint wrote, and names what it cannot") {
  // The newest checkpoint's last tensor in file order is damaged, so the one pass had written
  // every other tensor from it before finding out.
  TempDir dir;
  save_two(dir);
  const std::string newest = dir / "model.ckpt-2.h5";
  flip_bit(newest, last_tensor_offset(newest), 1);
  check_falls_back_to_step_1(dir);  // every tensor the damaged file wrote is step 1's again

  // The earlier checkpoint lacks a tensor the damaged one wrote (allow_missing): its value would
  // be the damaged file's, so restore says so instead of returning.
  TempDir grown;
  CheckpointManager manager({.directory = grown.str(), .async = false});
  TensorBundle smaller = sample_bundle(1, 1);
  smaller.tensors.erase(
      std::remove_if(smaller.tensors.begin(), smaller.tensors.end(),
                     [](const TensorEntry& entry) { return entry.name == "dense/bias"; }),
      smaller.tensors.end());
  manager.save(smaller);
  manager.save(sample_bundle(2, 2));
  const std::string grown_newest = grown / "model.ckpt-2.h5";
  flip_bit(grown_newest, last_tensor_offset(grown_newest), 1);
  TensorBundle model = sample_bundle(0, 50);
  LogCapture log;
  std::string message = what_of([&] { restore_into(grown.str(), model, {.allow_missing = true}); });
  CHECK(message.find("Restored " + grown / "model.ckpt-1.h5") != std::string::npos);
  CHECK(message.find("\"dense/bias\"") != std::string::npos);
  CHECK(message.find("initialize them again") != std::string::npos);
}

TEST_CASE("a checkpoint listed in the state file but deleted is skipped with a warning") {
  TempDir dir;
  save_two(dir);
  fs::remove(dir / "model.ckpt-2.h5");
  LogCapture log;
  TensorBundle model = sample_bundle(0, 50);
  CHECK(restore_into(dir.str(), model).path == dir / "model.ckpt-1.h5");
  REQUIRE(log.warnings().size() == 1);
  CHECK(log.warnings()[0].find("model.ckpt-2.h5") != std::string::npos);
}

TEST_CASE("a flipped bit anywhere is detected or harmless, never a crash") {
  // HDF5 checksums the metadata of the 1.8 format and we checksum the data, so a flip is
  // either reported as DataLossError or hits bytes no value depends on (padding, unused
  // space); load() must never crash or return different values. The sweep runs in a child
  // process: libhdf5 1.10 leaks a little on some damaged object headers and then prints
  // "infinite loop closing library" at exit (HDFGroup/hdf5#3790, fixed in later releases);
  // the child leaves through _exit, so that noise stays out of this process.
  TempDir dir;
  const std::string path = dir / "model.ckpt-3.h5";
  const TensorBundle saved = sample_bundle(3);
  save(path, saved);
  const std::string pristine = dir / "pristine";
  fs::copy_file(path, pristine);
  const auto size = static_cast<int64_t>(fs::file_size(path));
  const int trials = 150;

  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_ends[0]);
    std::mt19937 random(1234);
    int counts[3] = {0, 0, 0};  // detected, harmless, wrong (loaded but different)
    for (int trial = 0; trial < trials; ++trial) {
      fs::copy_file(pristine, path, fs::copy_options::overwrite_existing);
      int64_t byte = std::uniform_int_distribution<int64_t>(0, size - 1)(random);
      flip_bit(path, byte, std::uniform_int_distribution<int>(0, 7)(random));
      try {
        TensorBundle loaded = load(path);
        bool same = loaded.global_step == saved.global_step &&
                    loaded.tensors.size() == saved.tensors.size() &&
                    loaded.blobs.size() == saved.blobs.size();
        for (const TensorEntry& entry : saved.tensors) {
          const TensorEntry* found = loaded.find(entry.name);
          same = same && found && same_bytes(found->value, entry.value);
        }
        for (const Blob& blob : saved.blobs) {
          const Blob* found = loaded.find_blob(blob.name);
          same = same && found && found->bytes == blob.bytes;
        }
        ++counts[same ? 1 : 2];
      } catch (const DataLossError&) {
        ++counts[0];
      } catch (...) {
        ++counts[2];
      }
    }
    ssize_t written = ::write(pipe_ends[1], counts, sizeof(counts));
    ::_exit(written == sizeof(counts) ? 0 : 1);
  }
  ::close(pipe_ends[1]);
  int counts[3] = {-1, -1, -1};
  ssize_t got = ::read(pipe_ends[0], counts, sizeof(counts));
  ::close(pipe_ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE_MESSAGE(WIFEXITED(status), "the child crashed (signal ", WTERMSIG(status), ")");
  REQUIRE(got == static_cast<ssize_t>(sizeof(counts)));
  MESSAGE(fmt::format("{} of {} flips detected, {} harmless, {} wrong (file of {} bytes)",
                      counts[0], trials, counts[1], counts[2], size));
  CHECK(counts[2] == 0);
  CHECK(counts[0] + counts[1] == trials);
  CHECK(counts[0] > trials / 2);
}
