// est-ckpt, run as a program: listing with statistics and checksums, printing one variable,
// verifying a directory with a damaged checkpoint, usage errors.
#include <zlib.h>

#include "helpers.h"

using namespace est;
using namespace est::checkpoint;
using namespace est::testing;

namespace {

#ifndef EST_TEST_CKPT_TOOL
#error "EST_TEST_CKPT_TOOL must name the est-ckpt executable"
#endif
constexpr const char* kTool = EST_TEST_CKPT_TOOL;

CommandResult tool(const std::string& arguments) {
  REQUIRE_MESSAGE(fs::exists(kTool), "build the est-ckpt target first: ", kTool);
  return run_command(std::string(kTool) + " " + arguments);
}

}  // namespace

TEST_CASE("est-ckpt lists tensors with dtype, shape, crc32 and min/max/mean") {
  TempDir dir;
  TensorBundle bundle;
  bundle.global_step = 31;
  bundle.add_variable("dense/kernel", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  bundle.add_variable("counts", Tensor::from_vector<int64_t>({-4, 10}), false);
  bundle.add_slot("dense/kernel/Momentum", Tensor::zeros({2, 3}));
  bundle.add_blob("iterator", "abc");
  CheckpointManager manager({.directory = dir.str(), .async = false});
  manager.save(bundle);

  CommandResult result = tool(dir.str());  // a directory: its latest checkpoint
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  const std::string& out = result.output;
  CHECK(out.find("model.ckpt-31.h5") != std::string::npos);
  CHECK(out.find("global_step 31") != std::string::npos);
  // CRC-32 recomputed here with zlib over the same bytes.
  const Tensor& kernel = bundle.find("dense/kernel")->value;
  uLong crc =
      ::crc32(0L, static_cast<const Bytef*>(kernel.raw_data()), static_cast<uInt>(kernel.nbytes()));
  // Hand-computed statistics: min 1, max 6, mean 3.5; counts: min -4, max 10, mean 3.
  CHECK(out.find(fmt::format("dense/kernel           variable  float32  [2, 3]            {:08x}",
                             crc)) != std::string::npos);
  CHECK(out.find("           1             6           3.5") != std::string::npos);
  CHECK(out.find("counts") != std::string::npos);
  CHECK(out.find("          -4            10             3") != std::string::npos);
  CHECK(out.find("dense/kernel/Momentum  slot") != std::string::npos);
  CHECK(out.find("iterator") != std::string::npos);
  CHECK(out.find("3 bytes") != std::string::npos);

  result = tool(dir / "model.ckpt-31.h5 dense/kernel");
  CHECK(result.exit_code == 0);
  CHECK(result.output.find("dense/kernel float32 [2, 3]") != std::string::npos);
  CHECK(result.output.find("1 2 3\n4 5 6\n") != std::string::npos);
  result = tool(dir / "model.ckpt-31.h5 nope");
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("NOT_FOUND") != std::string::npos);
}

TEST_CASE("est-ckpt --verify reports damaged checkpoints and exits 1") {
  TempDir dir;
  {
    CheckpointManager manager({.directory = dir.str(), .async = false});
    manager.save(sample_bundle(1));
    manager.save(sample_bundle(2));
  }
  CommandResult result = tool("--verify " + dir.str());
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output.find("OK       model.ckpt-1.h5") != std::string::npos);
  CHECK(result.output.find("OK       model.ckpt-2.h5") != std::string::npos);

  fs::resize_file(dir / "model.ckpt-2.h5", 1000);
  const std::string stale = fmt::format("model.ckpt-3.h5.tmp-{}-0", dead_pid());
  LiveChild live;
  const std::string in_flight = fmt::format("model.ckpt-4.h5.tmp-{}-0", live.pid());
  std::ofstream(dir / stale) << "partial";
  std::ofstream(dir / in_flight) << "partial";
  result = tool("--verify " + dir.str());
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("OK       model.ckpt-1.h5") != std::string::npos);
  CHECK(result.output.find("DAMAGED  model.ckpt-2.h5") != std::string::npos);
  CHECK(result.output.find("TEMP     " + stale + " (left by an interrupted save") !=
        std::string::npos);
  CHECK(result.output.find("TEMP     " + in_flight + " (a save in progress") != std::string::npos);
  CHECK(result.output.find("1 problem(s)") != std::string::npos);
  CHECK(fs::exists(dir / "model.ckpt-2.h5"));  // reported, not removed

  // An empty state file is reported, and the checkpoints beside it are still verified.
  std::ofstream(dir / "checkpoint", std::ios::trunc).close();
  result = tool("--verify " + dir.str());
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("DAMAGED  checkpoint (the state file): Invalid checkpoint state") !=
        std::string::npos);
  CHECK(result.output.find("OK       model.ckpt-1.h5 (not in the state file)") !=
        std::string::npos);

  CHECK(tool("").exit_code == 2);
  CHECK(tool("--bogus x").exit_code == 2);
  CHECK(tool("--help").exit_code == 0);
}

TEST_CASE("est-ckpt on a file with damaged HDF5 metadata: one error line, no HDF5 shutdown junk") {
  TempDir dir;
  {
    CheckpointManager manager({.directory = dir.str(), .async = false});
    manager.save(sample_bundle(1));
  }
  const fs::path good = dir / "model.ckpt-1.h5";
  int refused = 0;
  for (std::streamoff offset : {100, 200, 300, 400}) {  // object headers and B-tree nodes
    CAPTURE(offset);
    const fs::path damaged = dir / "damaged.h5";
    fs::copy_file(good, damaged, fs::copy_options::overwrite_existing);
    {
      std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(offset);
      file.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    }
    CommandResult result = tool(damaged.string());
    CAPTURE(result.output);
    if (result.exit_code != 0) ++refused;
    // HDF5's atexit handler printed "HDF5: infinite loop closing library" and a line of
    // package names after the tool's own message.
    CHECK(result.output.find("infinite loop") == std::string::npos);
    CHECK(result.output.find("FL,FL") == std::string::npos);
  }
  CHECK(refused > 0);
}

TEST_CASE("est-ckpt prints values that parse back to the same bits") {
  // The first float32 above 1000 whose 8-digit print names another float32 (found, not
  // assumed): in [1000, 1024) 8 digits step by 1e-4 and float32 by 6.1e-5.
  float f = 1000.0f;
  auto parses_back = [](float x, const char* format) {
    return std::strtof(fmt::format(fmt::runtime(format), x).c_str(), nullptr) == x;
  };
  while (f < 1024.0f && parses_back(f, "{:.8g}")) f = std::nextafter(f, 1024.0f);
  REQUIRE(f < 1024.0f);
  CHECK(parses_back(f, "{:.9g}"));
  const double d = 0.1 + 0.2;           // 0.30000000000000004: 17 digits
  const int64_t big = (1LL << 53) + 1;  // no double holds it
  TempDir dir;
  TensorBundle bundle;
  bundle.add_variable("f", Tensor::from_vector<float>({f, -f}));
  bundle.add_variable("d", Tensor::from_vector<double>({d}));
  bundle.add_variable("i", Tensor::from_vector<int64_t>({big, -3}));
  CheckpointManager manager({.directory = dir.str(), .async = false});
  manager.save(bundle);

  CommandResult result = tool(dir.str() + " f");
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  const std::string line = result.output.substr(result.output.find('\n') + 1);
  char* end = nullptr;
  const float first = std::strtof(line.c_str(), &end);
  const float second = std::strtof(end, nullptr);
  CHECK(std::memcmp(&first, &f, sizeof f) == 0);
  CHECK(second == -f);
  CHECK(line == fmt::format("{:.9g} {:.9g}\n", f, -f));

  result = tool(dir.str() + " d");
  CHECK(result.output.substr(result.output.find('\n') + 1) == "0.30000000000000004\n");
  CHECK(std::strtod("0.30000000000000004", nullptr) == d);
  result = tool(dir.str() + " i");
  CHECK(result.output.substr(result.output.find('\n') + 1) == "9007199254740993 -3\n");
}
