// One line of a text file as TensorFlow's line reader gives it (tensorflow/core/lib/io/
// inputbuffer.cc, InputBuffer::ReadLine, behind TextLineDataset and the vocabulary files of
// lookup tables): the bytes up to '\n', with every '\r' dropped, so that a file written with
// Windows line ends reads as the same keys.
#pragma once

#include <istream>
#include <string>

namespace est::ops {

// Reads the next line of `in` into `line` as TF's reader does; false at the end of the input.
inline bool read_text_line(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  std::erase(line, '\r');
  return true;
}

}  // namespace est::ops
