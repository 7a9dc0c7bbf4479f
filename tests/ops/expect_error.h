// A test helper: runs a callable that should throw `E` and returns the message, so a test can
// check both the error class and that the message names what it should.
#pragma once

#include <string>

#include "ops/error.h"

namespace est::testing {

// The message of the `E` thrown by fn(); "<no error>" or "<other error: ...>" otherwise.
template <class E, class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other error: ") + e.what() + ">";
  }
  return "<no error>";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace est::testing
