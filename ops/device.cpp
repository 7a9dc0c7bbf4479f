// Device names in TensorFlow's spellings.
#include "ops/device.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "ops/error.h"

namespace est::ops {

Device Device::parse(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view rest = lower;
  // Keep the last path component: "/job:worker/task:0/device:gpu:1" -> "device:gpu:1".
  if (auto slash = rest.rfind('/'); slash != std::string_view::npos) rest = rest.substr(slash + 1);
  if (rest.starts_with("device:")) rest.remove_prefix(7);
  Device device;
  if (rest.starts_with("cpu")) {
    device.type = DeviceType::kCPU;
    rest.remove_prefix(3);
  } else if (rest.starts_with("gpu")) {
    device.type = DeviceType::kCUDA;
    rest.remove_prefix(3);
  } else if (rest.starts_with("cuda")) {
    device.type = DeviceType::kCUDA;
    rest.remove_prefix(4);
  } else {
    throw InvalidArgumentError("unknown device '" + std::string(name) +
                               "': expected a name like /cpu:0 or /gpu:1");
  }
  if (rest.empty()) return device;
  if (rest.front() != ':')
    throw InvalidArgumentError("malformed device '" + std::string(name) +
                               "': expected ':' and an index, as in /gpu:1");
  rest.remove_prefix(1);
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), device.index);
  if (ec != std::errc() || end != rest.data() + rest.size() || device.index < 0)
    throw InvalidArgumentError("malformed device index in '" + std::string(name) +
                               "': expected a non-negative integer");
  return device;
}

std::string Device::str() const {
  return std::string(is_cpu() ? "/cpu:" : "/gpu:") + std::to_string(index);
}

}  // namespace est::ops
