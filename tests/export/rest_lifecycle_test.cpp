// est-serve's versions and its end: it follows the newest version on disk at each poll, back to
// an older one when the newest is deleted and to none (404, TF Serving's message) when the base
// path is emptied (TF Serving's sources/storage_path/file_system_storage_path_source.cc); on
// SIGTERM a request in flight gets --rest_api_timeout_in_ms, then the process exits without it.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>

#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kPredict = "/v1/models/half_plus_two:predict";

// The answer to {"instances": [1.0]} once it is `expected` (a status, or a body when 200),
// asked every 100 ms for at most 15 s.
Reply await_answer(const Server& server, const testing::ScratchDir& dir, int status,
                   const json& body = {}) {
  Reply reply;
  for (int i = 0; i < 150; ++i) {
    reply = http(server, kPredict, R"({"instances": [1.0]})", &dir);
    if (reply.status == status && (body.is_null() || reply.body == body)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return reply;
}

}  // namespace

TEST_CASE("est-serve: a deleted newest version gives way to the next; no version left, 404") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  const std::string first = export_half_plus_two(dir / "model", dir / "serving");
  const int64_t first_version = std::stoll(fs::path(first).filename().string());
  // Version first + 1 answers x + 3.
  const std::string staged = export_half_plus_two(dir / "model2", dir / "staging", 1.0, 3.0);
  const fs::path newest = fs::path(dir / "serving") / std::to_string(first_version + 1);
  fs::rename(staged, newest);
  fs::copy(first, dir / "kept", fs::copy_options::recursive);
  Server server(dir / "serving", dir);
  CHECK(http(server, kPredict, R"({"instances": [1.0]})", &dir).body["predictions"][0] == 4.0);

  fs::remove_all(newest);
  Reply older = await_answer(server, dir, 200, json::parse(R"({"predictions": [2.5]})"));
  CHECK(older.body == json::parse(R"({"predictions": [2.5]})"));
  CHECK(http(server, "/v1/models/half_plus_two").body["model_version_status"][0]["version"] ==
        std::to_string(first_version));

  fs::remove_all(first);
  Reply none = await_answer(server, dir, 404);
  CHECK(none.status == 404);
  CHECK(none.body["error"] == "Servable not found for request: Latest(half_plus_two)");
  Reply status = http(server, "/v1/models/half_plus_two");
  CHECK(status.status == 404);
  CHECK(status.body["error"] == "Servable not found for request: Latest(half_plus_two)");
  CHECK(server.log().find("No versions of servable half_plus_two found") != std::string::npos);

  // A version that comes back is served again.
  fs::rename(dir / "kept", first);
  CHECK(await_answer(server, dir, 200).body == json::parse(R"({"predictions": [2.5]})"));
}

TEST_CASE("est-serve: SIGTERM waits --rest_api_timeout_in_ms for a request in flight, no more") {
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir, {"--rest_api_timeout_in_ms", "1500"});
  // A client that keeps its request in flight: its headers announce a body it sends a byte
  // every 100 ms (under the read timeout), for at most 20 s.
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(client >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  const std::string head = std::string("POST ") + kPredict +
                           " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: 100000\r\n\r\n{";
  REQUIRE(send(client, head.data(), head.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(head.size()));
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int i = 0; i < 200 && !done; ++i) {
      if (send(client, " ", 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::optional<int> status = server.terminate(std::chrono::seconds(10));
  done = true;
  trickle.join();
  close(client);
  REQUIRE_MESSAGE(status.has_value(), "est-serve still runs 10 s after SIGTERM");
  CHECK(*status == 1);
  CHECK(server.log().find("1 request(s) still in flight 1500 ms (--rest_api_timeout_in_ms)") !=
        std::string::npos);
}

TEST_CASE("est-serve: SIGTERM with no request in flight exits 0 at once") {
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir, {"--rest_api_timeout_in_ms", "60000"});
  if (have_curl()) CHECK(http(server, "/v1/models/half_plus_two").status == 200);
  const std::optional<int> status = server.terminate(std::chrono::seconds(10));
  REQUIRE(status.has_value());
  CHECK(*status == 0);
}
