// Writing one checkpoint file, durably and atomically.
//
// save() is the whole protocol for a single file: validate the bundle, write every tensor and
// blob with its CRC-32 into "<name>.tmp-<pid>-<n>" in the target directory, close, fsync,
// rename over the final name, fsync the directory. A crash at any point leaves the previous
// file (if any) intact. The layout is described in FORMAT.md.
#pragma once

#include <string>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

struct SaveOptions {
  double timestamp = 0;  // creation time to record, seconds since the epoch; 0: now
};

// Throws InvalidArgumentError for a bundle the format cannot hold (see validate_bundle), and
// PermissionDenied/ResourceExhausted/Unavailable/UnknownError naming the file on I/O failure;
// the temporary file is removed in every case.
void save(const std::string& path, const TensorBundle& bundle, const SaveOptions& options = {});

// "model.ckpt-200.h5": the file name of a checkpoint at `global_step`.
std::string checkpoint_file_name(const std::string& checkpoint_name, int64_t global_step);

}  // namespace est::checkpoint
