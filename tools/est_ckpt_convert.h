// `est-ckpt convert SRC DST --to tf|est`: est's HDF5 checkpoint into TensorFlow's V2 format and
// back (checkpoint/tf_convert.h). est_ckpt.cpp hands it the arguments after "convert".
#pragma once

namespace est::tools {

// argv[0] is "convert"; returns the exit status (0, 1 on an error, 2 on a usage error).
int convert_main(int argc, char** argv);

}  // namespace est::tools
