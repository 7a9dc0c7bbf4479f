// Zip archives as Python's zipfile writes them for Keras 3's `.keras` file
// (keras/src/saving/saving_lib.py opens zipfile.ZipFile(f, "w"), whose default compression is
// ZIP_STORED: entries are stored uncompressed, each with its CRC-32). Internal to keras/.
//
// The writer stores entries in the order given (Keras: metadata.json, config.json,
// model.weights.h5). The reader takes stored and deflated entries (other tools recompress
// archives), checks each entry's CRC-32 and sizes, and reports a damaged archive as a
// DataLossError naming the file and what is wrong.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace est::keras {

using ZipEntries = std::vector<std::pair<std::string, std::string>>;  // name, bytes

// NotFoundError/UnavailableError when the file cannot be written.
void write_zip(const std::string& path, const ZipEntries& entries);

// Every entry of the archive at `path`, in central directory order. NotFoundError when there
// is no file; DataLossError naming the file when it is not a zip archive, is truncated, or an
// entry fails its CRC-32.
ZipEntries read_zip(const std::string& path);

}  // namespace est::keras
