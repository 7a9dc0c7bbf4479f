// Import of Keras HDF5 weight files (the layout model.save_weights("x.h5") writes: a root
// attribute `layer_names`, one group per layer whose attribute `weight_names` lists entries
// like "dense/kernel:0", each a dataset at "<layer>/<weight name>"). Full-model files from
// model.save("x.h5") keep the same layout under /model_weights and are read too.
//
// Layouts agree with Keras (dense kernels [in, out], conv kernels HWIO), so weights load
// without transposition.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/bundle.h"

namespace est::checkpoint {

struct KerasImportOptions {
  // Our variable name -> Keras weight name ("dense_1/kernel:0"; the ":0" may be left out).
  // Variables not in the map look for their own name.
  std::map<std::string, std::string> name_map;
  // Our variables with no Keras weight keep their values instead of raising NotFoundError.
  bool allow_missing = false;
};

struct KerasImportResult {
  std::vector<std::string> imported;  // our names
  std::vector<std::string> missing;   // our variables with no Keras weight (allow_missing)
  std::vector<std::string> unused;    // Keras weights nothing took ("dense/kernel:0")
};

// Copies matching Keras weights into the variables (kind kVariable) of `into`, in place.
// Shape or dtype mismatches raise InvalidArgumentError naming both; name_map keys that are
// not variables of `into` or point at no Keras weight raise InvalidArgumentError. Nothing is
// assigned unless everything fits.
KerasImportResult import_keras_h5(const std::string& path, TensorBundle& into,
                                  const KerasImportOptions& options = {});

// The weights of a Keras file by weight name, in file order (for tools and tests).
std::vector<std::pair<std::string, Tensor>> read_keras_h5(const std::string& path);

}  // namespace est::checkpoint
