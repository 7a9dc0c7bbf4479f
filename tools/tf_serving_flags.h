// tensorflow_model_server's flags that est-serve accepts without acting on them, so that a
// deployment's command line works after the binary's name changes (the list:
// tensorflow_serving/model_servers/main.cc). est-serve parses its own flags with CLI11,
// allowing extras; filter_extras() then warns about each extra that is one of TF Serving's,
// naming it, and refuses anything else.
#pragma once

#include <string>
#include <vector>

namespace est::serve {

// The names (without "--") of TF Serving's flags.
const std::vector<std::string>& tf_serving_flag_names();

// `extras` (CLI11's remaining arguments, in order: "--name=value", or "--name" then its value)
// checked: a warning for each of TF Serving's flags on stderr; the first argument that is not
// one of them returned (empty when all are).
std::string filter_extras(const std::vector<std::string>& extras);

}  // namespace est::serve
