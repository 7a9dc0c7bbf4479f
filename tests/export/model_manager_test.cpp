// ModelManager's version transitions as TF Serving's default policy makes them
// (core/availability_preserving_policy.cc): while a new version loads (its load hook held on a
// latch the test releases), the old one is still served and answers; it is unloaded only once
// the new one is; a new version that fails to load leaves the old one serving (and is END with
// its error in the model's status, as TF Serving reports it); and with several
// old versions served, all but the newest go before the new one loads.
#include <doctest/doctest.h>

#include <future>

#include "export/rest_api.h"
#include "export/servable.h"
#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::serving;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr auto kBound = std::chrono::seconds(60);  // every wait is bounded

// half_plus_two exported once under `dir`, copied to `base`/<version> for each version given.
void place_versions(const testing::ScratchDir& dir, const std::string& base,
                    const std::vector<int64_t>& versions) {
  const fs::path exported = dir.path() / "exported";
  if (!fs::exists(exported))
    fs::rename(testing::serve::export_half_plus_two(dir / "model", dir / "export"), exported);
  fs::create_directories(base);
  for (int64_t version : versions)
    fs::copy(exported, fs::path(base) / std::to_string(version), fs::copy_options::recursive);
}

std::vector<int64_t> served_versions(const ModelManager& model) {
  std::vector<int64_t> versions;
  for (const auto& servable : model.served()) versions.push_back(servable->version);
  return versions;
}

// Releases a load held on the latch when the test leaves early, so poll() never waits forever.
struct Latch {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  bool done = false;
  void release() {
    if (!std::exchange(done, true)) open.set_value();
  }
  ~Latch() { release(); }
};

const char* const kPredict = "/v1/models/half_plus_two:predict";

}  // namespace

TEST_CASE("ModelManager: the old version answers while the new one loads, and goes after it") {
  testing::ScratchDir dir;
  const std::string base = dir / "half_plus_two";
  place_versions(dir, base, {1});
  std::promise<void> loading;
  Latch latch;
  ModelManager model("half_plus_two", base, {}, {}, [&](const Servable& servable) {
    if (servable.version != 2) return;
    loading.set_value();
    latch.opened.wait_for(kBound);
  });
  REQUIRE(model.poll());
  REQUIRE(served_versions(model) == std::vector<int64_t>{1});
  place_versions(dir, base, {2});
  auto polled = std::async(std::launch::async, [&] { return model.poll(); });
  // Version 2 is loaded and held in its load hook (warmup): version 1 still serves.
  REQUIRE(loading.get_future().wait_for(kBound) == std::future_status::ready);
  CHECK(served_versions(model) == std::vector<int64_t>{1});
  REQUIRE(model.current() != nullptr);
  CHECK(model.current()->version == 1);
  const RestResponse during = handle_rest(model, "POST", kPredict, R"({"instances": [1.0]})");
  INFO(during.body);
  CHECK(during.status == 200);
  CHECK(json::parse(during.body)["predictions"] == json::array({2.5}));
  latch.release();
  REQUIRE(polled.wait_for(kBound) == std::future_status::ready);
  CHECK(polled.get());
  CHECK(served_versions(model) == std::vector<int64_t>{2});
}

TEST_CASE("ModelManager: a new version that fails to load leaves the old one serving") {
  testing::ScratchDir dir;
  const std::string base = dir / "half_plus_two";
  place_versions(dir, base, {1});
  bool warmup_fails = true;  // the load hook (warmup) of version 2 throws, as a bad warmup does
  std::vector<std::vector<int64_t>> seen;  // the versions served while each load ran
  ModelManager* manager = nullptr;
  ModelManager model("half_plus_two", base, {}, {}, [&](const Servable& servable) {
    seen.push_back(served_versions(*manager));
    if (servable.version == 2 && warmup_fails) throw DataLossError("warmup failed");
  });
  manager = &model;
  REQUIRE(model.poll());
  place_versions(dir, base, {2});
  CHECK_FALSE(model.poll());
  CHECK(served_versions(model) == std::vector<int64_t>{1});
  CHECK(handle_rest(model, "POST", kPredict, R"({"instances": [1.0]})").status == 200);
  // A version whose model does not parse is refused too; version 1 still serves.
  fs::create_directories(fs::path(base) / "3");
  std::ofstream(fs::path(base) / "3" / "model.onnx") << "not a model";
  CHECK_FALSE(model.poll());
  CHECK(served_versions(model) == std::vector<int64_t>{1});
  // The failed versions are in the model's status as TF Serving's monitor keeps them: END, with
  // their load's error, newest first.
  std::vector<VersionStatus> statuses = model.statuses();
  REQUIRE(statuses.size() == 3);
  CHECK(statuses[0].version == 3);
  CHECK(statuses[0].error == StatusCode::kDataLoss);
  CHECK(statuses[0].error_message.find("is not an ONNX model") != std::string::npos);
  CHECK(statuses[1].version == 2);
  CHECK(statuses[1].error == StatusCode::kDataLoss);
  CHECK(statuses[1].error_message == "warmup failed");
  CHECK(statuses[2].version == 1);
  CHECK_FALSE(statuses[2].error);
  const RestResponse status = handle_rest(model, "GET", "/v1/models/half_plus_two/versions/2", "");
  CHECK(status.status == 200);
  CHECK(json::parse(status.body) ==
        json::parse(R"({"model_version_status": [{"version": "2", "state": "END",
            "status": {"error_code": "DATA_LOSS", "error_message": "warmup failed"}}]})"));
  // With 3 gone and the warmup fixed, the next poll retries version 2: it loads, then 1 goes.
  fs::remove_all(fs::path(base) / "3");
  warmup_fails = false;
  CHECK(model.poll());
  CHECK(served_versions(model) == std::vector<int64_t>{2});
  CHECK(seen == std::vector<std::vector<int64_t>>{{}, {1}, {1}});
  statuses = model.statuses();
  REQUIRE(statuses.size() == 2);  // 3 stays END, as in TF Serving; 2 is now AVAILABLE
  CHECK(statuses[0].error == StatusCode::kDataLoss);
  CHECK(statuses[1].version == 2);
  CHECK_FALSE(statuses[1].error);
}

TEST_CASE(
    "ModelManager: from all versions to latest 1, the newest old one serves until the new "
    "one is loaded; specific versions change the same way") {
  testing::ScratchDir dir;
  const std::string base = dir / "half_plus_two";
  place_versions(dir, base, {1, 2, 3});
  std::vector<std::pair<int64_t, std::vector<int64_t>>> seen;  // (loading, served then)
  ModelManager* manager = nullptr;
  ModelManager model("half_plus_two", base, {.kind = VersionPolicy::Kind::kAll}, {},
                     [&](const Servable& servable) {
                       seen.emplace_back(servable.version, served_versions(*manager));
                     });
  manager = &model;
  REQUIRE(model.poll());
  REQUIRE(served_versions(model) == std::vector<int64_t>{1, 2, 3});
  // Highest first, as TF Serving loads them.
  CHECK(seen == decltype(seen){{3, {}}, {2, {3}}, {1, {2, 3}}});
  seen.clear();
  place_versions(dir, base, {4});
  model.reconfigure({}, {});  // latest 1
  CHECK(model.poll());
  CHECK(served_versions(model) == std::vector<int64_t>{4});
  CHECK(seen == decltype(seen){{4, {3}}});
  seen.clear();
  // Pinned to version 2 (older): 4 serves until 2 is loaded.
  model.reconfigure({.kind = VersionPolicy::Kind::kSpecific, .versions = {2}}, {});
  CHECK(model.poll());
  CHECK(served_versions(model) == std::vector<int64_t>{2});
  CHECK(seen == decltype(seen){{2, {4}}});
  // No version on disk: nothing is aspired, and every version is unloaded.
  for (int64_t version : {1, 2, 3, 4}) fs::remove_all(fs::path(base) / std::to_string(version));
  CHECK(model.poll());
  CHECK(model.served().empty());
  CHECK(handle_rest(model, "POST", kPredict, R"({"instances": [1.0]})").status == 404);
}
