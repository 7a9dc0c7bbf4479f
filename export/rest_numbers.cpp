// A REST :predict body of plain numbers read without a DOM (see rest_numbers.h). Followed:
// RFC 8259 for the grammar (nlohmann's lexer is as strict: no '+', no leading zeros, no bare
// '.'), and nlohmann's lexer for the values (integers through strtoll/strtoull, falling back to
// strtod when out of range), which is what the DOM path reads.
#include "export/rest_numbers.h"

#include <charconv>
#include <cstdint>

#include "export/rest_json_text.h"

namespace est::serving {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Scanner {
 public:
  explicit Scanner(std::string_view text) : at_(text.data()), end_(text.data() + text.size()) {}

  void skip_space() {
    while (at_ < end_ && (*at_ == ' ' || *at_ == '\n' || *at_ == '\r' || *at_ == '\t')) ++at_;
  }
  // Consumes `c` after any space.
  bool eat(char c) {
    skip_space();
    if (at_ == end_ || *at_ != c) return false;
    ++at_;
    return true;
  }
  bool at_end() {
    skip_space();
    return at_ == end_;
  }

  // A string without escapes or control characters (the DOM path reads the others).
  std::optional<std::string_view> string() {
    if (!eat('"')) return std::nullopt;
    const char* start = at_;
    for (; at_ < end_ && *at_ != '"'; ++at_)
      if (*at_ == '\\' || static_cast<unsigned char>(*at_) < 0x20) return std::nullopt;
    if (at_ == end_) return std::nullopt;
    return std::string_view(start, static_cast<size_t>(at_++ - start));
  }

  // A nested list of numbers, or a number, at `depth` below the request's value. The first
  // path down fixes the rank and each list's length; every later list must match them.
  bool value(size_t depth, Shape& shape, std::optional<size_t>& leaf_depth,
             std::vector<double>& values) {
    skip_space();
    if (at_ == end_) return false;
    if (*at_ != '[') {
      if (!leaf_depth) leaf_depth = depth;
      return *leaf_depth == depth && number(values);
    }
    ++at_;
    // kMaxJsonDepth bounds this recursion; the DOM path names the error.
    if (depth + 1 >= static_cast<size_t>(kMaxJsonDepth) || (leaf_depth && depth >= *leaf_depth))
      return false;
    if (shape.size() == depth) shape.push_back(-1);
    int64_t length = 0;
    do {
      if (!value(depth + 1, shape, leaf_depth, values)) return false;
      ++length;
    } while (eat(','));
    if (!eat(']')) return false;
    if (shape[depth] < 0) shape[depth] = length;
    return shape[depth] == length;
  }

 private:
  // A JSON number, as nlohmann reads it.
  bool number(std::vector<double>& values) {
    const char* start = at_;
    if (at_ < end_ && *at_ == '-') ++at_;
    if (at_ == end_ || !is_digit(*at_)) return false;
    if (*at_ == '0')
      ++at_;
    else
      while (at_ < end_ && is_digit(*at_)) ++at_;
    bool integer = true;
    if (at_ < end_ && *at_ == '.') {
      integer = false;
      if (++at_ == end_ || !is_digit(*at_)) return false;
      while (at_ < end_ && is_digit(*at_)) ++at_;
    }
    if (at_ < end_ && (*at_ == 'e' || *at_ == 'E')) {
      integer = false;
      if (++at_ < end_ && (*at_ == '+' || *at_ == '-')) ++at_;
      if (at_ == end_ || !is_digit(*at_)) return false;
      while (at_ < end_ && is_digit(*at_)) ++at_;
    }
    if (integer) {
      int64_t signed_value = 0;
      if (auto [last, error] = std::from_chars(start, at_, signed_value);
          error == std::errc() && last == at_) {
        values.push_back(static_cast<double>(signed_value));
        return true;
      }
      uint64_t unsigned_value = 0;
      if (auto [last, error] = std::from_chars(start, at_, unsigned_value);
          *start != '-' && error == std::errc() && last == at_) {
        values.push_back(static_cast<double>(unsigned_value));
        return true;
      }
    }
    double number = 0;
    auto [last, error] = std::from_chars(start, at_, number);
    if (error != std::errc() || last != at_) return false;
    values.push_back(number);
    return true;
  }

  const char* at_;
  const char* end_;
};

}  // namespace

std::optional<NumericRequest> read_numeric_request(std::string_view body) {
  Scanner scanner(body);
  NumericRequest request;
  request.values.reserve(body.size() / 8);  // a number and its comma take at least 2 bytes
  bool have_values = false;
  if (!scanner.eat('{')) return std::nullopt;
  do {
    const std::optional<std::string_view> key = scanner.string();
    if (!key || !scanner.eat(':')) return std::nullopt;
    if (*key == "signature_name") {
      const std::optional<std::string_view> name = scanner.string();
      if (!name || request.signature_name) return std::nullopt;
      request.signature_name = std::string(*name);
    } else if (*key == "instances" || *key == "inputs") {
      if (have_values) return std::nullopt;
      have_values = true;
      request.rows = *key == "instances";
      std::optional<size_t> leaf_depth;
      if (!scanner.value(0, request.shape, leaf_depth, request.values)) return std::nullopt;
      if (request.rows && request.shape.empty()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  } while (scanner.eat(','));
  if (!scanner.eat('}') || !scanner.at_end() || !have_values) return std::nullopt;
  return request;
}

}  // namespace est::serving
