// Reading and writing the REST API's JSON text (see rest_json_text.h). Followed: TF Serving's
// util/json_tensor.cc (ParseJson's rapidjson flags kParseIterativeFlag | kParseNanAndInfFlag,
// and WriteDecimal for non-finite numbers).
//
// nlohmann's parser does not recurse, but what walks its values does (shape_of, the
// destructor of a deep value, dump); so the depth is bounded by a scan of the body first. The
// same scan rewrites the non-finite tokens, which nlohmann does not read, into number tokens
// that no client sends (a client's token that happens to spell one is rewritten to 0, the value
// it has), and the parser's handler turns them back into NaN and infinities.
#include "export/rest_json_text.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "ops/error.h"

namespace est::serving {
namespace {

using json = nlohmann::json;

// Number tokens standing for the non-finite values (each is 0 to any JSON reader).
constexpr std::string_view kNanToken = "0e-999999901";
constexpr std::string_view kInfinityToken = "0e-999999902";
constexpr std::string_view kMinusInfinityToken = "0e-999999903";

// What a bare token of the body is rewritten to, or empty when it stays.
std::string_view rewritten(std::string_view token) {
  if (token == "NaN" || token == "-NaN") return kNanToken;
  if (token == "Infinity" || token == "Inf") return kInfinityToken;
  if (token == "-Infinity" || token == "-Inf") return kMinusInfinityToken;
  if (token == kNanToken || token == kInfinityToken || token == kMinusInfinityToken) return "0";
  return {};
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.';
}

// Checks the nesting of `body` and returns it with its non-finite tokens rewritten (nullopt
// when nothing needed rewriting). Linear; strings are skipped.
std::optional<std::string> scan(const std::string& body) {
  std::optional<std::string> out;
  size_t copied = 0;
  int depth = 0;
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"') {
      for (++i; i < body.size() && body[i] != '"'; ++i)
        if (body[i] == '\\') ++i;
      ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw InvalidArgumentError(fmt::format(
            "JSON Parse error: lists and objects nested more than {} deep at offset {}; a "
            "tensor has at most 254 dimensions",
            kMaxJsonDepth, i));
      ++i;
    } else if (c == ']' || c == '}') {
      --depth;
      ++i;
    } else if (is_token_char(c)) {
      size_t end = i;
      while (end < body.size() && is_token_char(body[end])) ++end;
      if (std::string_view to = rewritten(std::string_view(body).substr(i, end - i)); !to.empty()) {
        if (!out) out.emplace();
        out->append(body, copied, i - copied).append(to);
        copied = end;
      }
      i = end;
    } else {
      ++i;
    }
  }
  if (out) out->append(body, copied);
  return out;
}

// nlohmann's DOM builder, reading scan()'s tokens back as NaN and infinities.
class NonFiniteReader : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool number_float(double value, const std::string& token) {
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    if (token == kNanToken) value = std::numeric_limits<double>::quiet_NaN();
    if (token == kInfinityToken) value = kInfinity;
    if (token == kMinusInfinityToken) value = -kInfinity;
    return json_sax_dom_parser::number_float(value, token);
  }
};

void write(const json& value, std::string& out) {
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (it != value.begin()) out += ',';
        out += json(it.key()).dump();
        out += ':';
        write(it.value(), out);
      }
      out += '}';
      return;
    }
    case json::value_t::array:
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ',';
        write(value[i], out);
      }
      out += ']';
      return;
    case json::value_t::number_float: {
      const double number = value.get<double>();
      if (std::isnan(number))
        out += "NaN";
      else if (std::isinf(number))
        out += number < 0 ? "-Infinity" : "Infinity";
      else
        out += value.dump();
      return;
    }
    default:
      out += value.dump();
  }
}

}  // namespace

json parse_request_json(const std::string& body) {
  const std::optional<std::string> rewritten_body = scan(body);
  json value;
  NonFiniteReader reader(value, true);
  try {
    json::sax_parse(rewritten_body ? *rewritten_body : body, &reader);
  } catch (const json::exception& error) {
    throw InvalidArgumentError(fmt::format("JSON Parse error: {}", error.what()));
  }
  return value;
}

std::string answer_text(const json& value) {
  std::string out;
  write(value, out);
  return out;
}

std::string printable(const std::string& text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

}  // namespace est::serving
