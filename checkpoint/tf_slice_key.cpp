// OrderedCode's encodings for slice keys; see tf_slice_key.h. Written from the format
// description in TensorFlow's tensorflow/core/lib/strings/ordered_code.cc.
#include "checkpoint/tf_slice_key.h"

namespace est::checkpoint::tf_table {

void append_ordered_number(std::string& out, uint64_t value) {
  // A length byte, then the value big-endian without leading zero bytes.
  unsigned char bytes[8];
  int length = 0;
  for (; value > 0; value >>= 8) bytes[length++] = static_cast<unsigned char>(value & 0xff);
  out.push_back(static_cast<char>(length));
  for (int i = length - 1; i >= 0; --i) out.push_back(static_cast<char>(bytes[i]));
}

void append_ordered_signed_number(std::string& out, int64_t value) {
  // n bytes hold [-2^(7n-1), 2^(7n-1)): the sign-extended big-endian value's last n bytes, whose
  // leading n bits (all equal to the sign) are flipped; the bit after them marks the end of the
  // length. Ten bytes at most: the header then spills into the second byte.
  const uint64_t magnitude =
      value < 0 ? ~static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  int length = 1;
  while (length < 10 && magnitude >= (uint64_t{1} << (7 * length - 1))) ++length;
  unsigned char buffer[10];
  const unsigned char sign_byte = value < 0 ? 0xff : 0x00;
  buffer[0] = buffer[1] = sign_byte;
  for (int i = 0; i < 8; ++i)
    buffer[2 + i] = static_cast<unsigned char>(static_cast<uint64_t>(value) >> (56 - 8 * i));
  unsigned char* begin = buffer + 10 - length;
  // The header: `length` one-bits from the top of the first byte, continuing into the second.
  for (int bit = 0; bit < length; ++bit)
    begin[bit / 8] ^= static_cast<unsigned char>(0x80 >> (bit % 8));
  out.append(reinterpret_cast<const char*>(begin), static_cast<size_t>(length));
}

void append_ordered_string(std::string& out, std::string_view value) {
  // 0x00 and 0xff are escaped as 00 ff and ff 00; 00 01 ends the string.
  for (char c : value) {
    out.push_back(c);
    if (c == '\0') out.push_back('\xff');
    if (c == '\xff') out.push_back('\0');
  }
  out.append("\0\x01", 2);
}

std::string encode_tensor_name_slice(std::string_view name, const std::vector<SliceExtent>& slice) {
  std::string key;
  append_ordered_number(key, 0);
  append_ordered_string(key, name);
  append_ordered_number(key, slice.size());
  for (const SliceExtent& extent : slice) {
    append_ordered_signed_number(key, extent.start);
    append_ordered_signed_number(key, extent.length);
  }
  return key;
}

}  // namespace est::checkpoint::tf_table
