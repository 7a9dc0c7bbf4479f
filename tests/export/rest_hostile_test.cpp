// est-serve against ordinary clients' habits and hostile bodies and paths (TF Serving's
// behaviour: g3doc/api_rest.md, util/json_tensor.cc, model_servers/http_rest_api_handler.cc and
// http_rest_api_util.cc): a body nested 100000 deep is a 400 and the server keeps serving; any
// Content-Type is the JSON request (curl -d sends a form's); NaN and the infinities go in and
// come out as TF writes them; malformed paths and version labels are 400 with TF's messages;
// a client's text is echoed without control characters.
#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "tests/export/serve_harness.h"

namespace {

using namespace est;
using namespace est::testing::serve;
using nlohmann::json;

constexpr const char* kPredict = "/v1/models/half_plus_two:predict";

}  // namespace

TEST_CASE("est-serve: a body nested 100000 deep is a 400, and the server keeps serving") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  const std::string deep =
      R"({"instances": )" + std::string(100000, '[') + "1.0" + std::string(100000, ']') + "}";
  Reply reply = http(server, kPredict, deep, &dir);
  CHECK(reply.status == 400);
  CHECK(reply.body.value("error", "").find("nested more than") != std::string::npos);
  Reply after = http(server, kPredict, R"({"instances": [1.0]})", &dir);
  CHECK(after.status == 200);
  CHECK(after.body == json::parse(R"({"predictions": [2.5]})"));
}

TEST_CASE("est-serve: any Content-Type is the JSON request (curl -d sends a form's)") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir, {"--max_request_bytes", "20000"});
  // A 28x28 image's pixels as instances: over cpp-httplib's 8 KB form limit.
  std::string body = R"({"instances": [)";
  for (int pixel = 0; pixel < 784; ++pixel)
    body += fmt::format("{}{:.7f}", pixel ? ", " : "", (pixel * 37 % 256) / 255.0);
  body += "]}";
  REQUIRE(body.size() > 8192);
  const Reply as_json = http(server, kPredict, body, &dir);
  REQUIRE(as_json.status == 200);
  REQUIRE(as_json.body["predictions"].size() == 784);
  for (const std::string options :
       {"-d", "-H 'Content-Type: text/plain' --data-binary", "-H 'Content-Type:' --data-binary"}) {
    CAPTURE(options);
    const Reply reply = http(server, kPredict, body, &dir, options);
    CHECK(reply.status == 200);
    CHECK(reply.text == as_json.text);
  }
  // The same size limit as JSON's: a larger form body is refused (413).
  std::string large = body;
  large.insert(large.size() - 2, std::string(20000, ' '));
  CHECK(http(server, kPredict, large, &dir, "-d").status == 413);
  CHECK(http(server, kPredict, large, &dir).status == 413);
  // A multipart form is no JSON request: 400, and the server goes on.
  std::ofstream(dir / "image.json") << body;
  const auto multipart =
      testing::run_program("curl -s -m 30 -w ' %{http_code}' -F " +
                               testing::shell_quote("request=<" + dir / "image.json") + " " +
                               testing::shell_quote(server.url(kPredict)),
                           60);
  CHECK(multipart.output.find("multipart/form-data") != std::string::npos);
  CHECK(multipart.output.substr(multipart.output.size() - 4) == " 400");
  CHECK(http(server, kPredict, R"({"instances": [1.0]})", &dir, "-d").status == 200);
}

TEST_CASE("est-serve: NaN, Infinity and -Infinity go in and come out as TF Serving's") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  // y = 0.5 x + 2 (the last value is the number token NaN is read through: still 0).
  Reply rows = http(server, kPredict,
                    R"({"instances": [NaN, Infinity, -Infinity, 1.0, 0e-999999901]})", &dir);
  CHECK(rows.status == 200);
  CHECK(rows.text == R"({"predictions":[NaN,Infinity,-Infinity,2.5,2.0]})");
  Reply columns = http(server, kPredict, R"({"inputs": [-Inf, NaN]})", &dir);
  CHECK(columns.status == 200);
  CHECK(columns.text == R"({"outputs":[-Infinity,NaN]})");
  // A string is not a number, even one that reads "NaN".
  CHECK(http(server, kPredict, R"({"instances": ["NaN"]})", &dir).status == 400);
}

TEST_CASE("est-serve: a model's non-finite outputs of finite inputs are NaN and Infinity") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  // y = log(x) when serving (trained on a finite loss).
  auto model_fn = [](const Features& features, const Tensor& labels, ModeKeys mode,
                     ModelContext& ctx) {
    Tensor a = ctx.get_variable("a", {}, DType::kF32, nn::constant(1.0));
    if (mode == ModeKeys::kPredict)
      return EstimatorSpec::predict({{"y", ops::mul(ops::log(features.at("x")), a)}});
    Tensor loss = nn::mean_squared_error(labels, ops::mul(features.at("x"), a));
    return EstimatorSpec::train(loss, nn::optim::sgd(0.0).minimize(loss, ctx));
  };
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  export_model(model_fn, dir / "model", dir / "serving", {{"x", x}}, x, {{"x", {{-1}}}});
  Server server(dir / "serving", dir);
  Reply reply = http(server, kPredict, R"({"instances": [1.0, 0.0, -1.0]})", &dir);
  CHECK(reply.status == 200);
  CHECK(reply.text == R"({"predictions":[0.0,-Infinity,NaN]})");
}

TEST_CASE(
    "est-serve: malformed paths and version labels are 400 with TF Serving's messages; a "
    "client's control characters are echoed as \\xNN") {
  if (!have_curl()) return est::testing::skip("curl is not installed (apt-get install curl)");
  testing::ScratchDir dir;
  export_half_plus_two(dir / "model", dir / "serving");
  Server server(dir / "serving", dir);
  const std::string body = R"({"instances": [1.0]})";
  const std::string as_is = std::string("--path-as-is ") + kJsonPost;
  Reply dots = http(server, "/v1/models/../half_plus_two:predict", body, &dir, as_is);
  CHECK(dots.status == 400);
  CHECK(dots.body["error"] == "Malformed request: POST /v1/models/../half_plus_two:predict");
  Reply label = http(server, "/v1/models/half_plus_two/labels/stable:predict", body, &dir);
  CHECK(label.status == 400);
  CHECK(label.body["error"] == "Unrecognized servable version label: stable");
  Reply label_status = http(server, "/v1/models/half_plus_two/labels/stable");
  CHECK(label_status.status == 400);
  CHECK(label_status.body["error"] == "Unrecognized servable version label: stable");
  for (const char* path : {"/v1/models/half_plus_two/versions/x", "/v1/models/half_plus_two/",
                           "/v1/models/half_plus_two/versions/1/labels/a"}) {
    CAPTURE(path);
    Reply reply = http(server, path, {}, nullptr, "--path-as-is");
    CHECK(reply.status == 400);
    CHECK(reply.body["error"] == std::string("Malformed request: GET ") + path);
  }
  CHECK(http(server, "/v1/models").body["error"] == "Missing model name in request.");
  Reply verb = http(server, "/v1/models/half_plus_two:train", body, &dir);
  CHECK(verb.status == 400);
  CHECK(verb.body["error"] == "Malformed request: POST /v1/models/half_plus_two:train");
  // TF's paths are case-insensitive; outside /v1/ nothing is served (404).
  CHECK(http(server, "/V1/MODELS/half_plus_two/VERSIONS/999").status == 404);
  CHECK(http(server, "/v2/models/half_plus_two").status == 404);
  CHECK(http(server, "/v1/models/half_plus_two").status == 200);

  // A client's control characters are echoed as \xNN, never raw.
  Reply nul = http(server, "/v1/models/half%00plus:predict", body, &dir);
  CHECK(nul.status == 404);
  CHECK(nul.body["error"] == "Servable not found for request: Latest(half\\x00plus)");
  Reply signature = http(server, kPredict,
                         R"({"signature_name": "a\u0000\u001b[2Jb", "instances": [1.0]})", &dir);
  CHECK(signature.status == 400);
  CHECK(signature.body["error"] ==
        "Serving signature name: \"a\\x00\\x1b[2Jb\" not found in signature def");
  Reply path = http(server, "/v1/models/half_plus_two:pre%0Adict", body, &dir);
  CHECK(path.status == 400);
  CHECK(path.body["error"] == "Malformed request: POST /v1/models/half_plus_two:pre\\x0adict");
}
