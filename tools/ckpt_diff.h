// `est-ckpt diff A B`: the tensors of two checkpoints compared, each est's HDF5 checkpoint or
// TensorFlow's (a prefix, a directory or a SavedModel: checkpoint/source.h), as `diff` compares
// files: what is only in A, only in B, of another dtype or shape, or of other values (how many
// and the largest absolute difference).
#pragma once

#include <cstdio>
#include <string>

namespace est::tools {

// Prints the differences to `out`; returns diff's exit status: 0 when every tensor is in both
// with the same dtype, shape and values (NaN equal to NaN), 1 when they differ. Errors reading
// either checkpoint propagate (est::Error), for the caller to report with status 2.
int diff_checkpoints(const std::string& a, const std::string& b, std::FILE* out);

// The subcommand: argv[0] is "diff". Returns the exit status: 2 for a usage error (not two
// paths) or a checkpoint that cannot be read, the message on stderr.
int diff_main(int argc, char** argv);

}  // namespace est::tools
