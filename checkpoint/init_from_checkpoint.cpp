// initializer_from_checkpoint: one tensor of est's or TensorFlow's checkpoint (source.h),
// checked against the variable being created.
#include "checkpoint/init_from_checkpoint.h"

#include <fmt/format.h>

#include "checkpoint/source.h"

namespace est::checkpoint {

nn::Initializer initializer_from_checkpoint(std::string ckpt_to_load_from,
                                            std::string tensor_name_in_ckpt) {
  if (ckpt_to_load_from.empty() != tensor_name_in_ckpt.empty() || ckpt_to_load_from.empty())
    throw InvalidArgumentError(
        fmt::format("initializer_from_checkpoint: give both ckpt_to_load_from ('{}') and "
                    "tensor_name_in_ckpt ('{}')",
                    ckpt_to_load_from, tensor_name_in_ckpt));
  return [path = std::move(ckpt_to_load_from), name = std::move(tensor_name_in_ckpt)](
             const Shape& shape, DType dtype, ops::Generator&) {
    // est's checkpoint or TensorFlow's (source.h).
    Tensor value = open_checkpoint(path)->read(name);
    if (value.shape() != shape || value.dtype() != dtype)
      throw InvalidArgumentError(fmt::format(
          "tensor '{}' of checkpoint '{}' is {} {} but the variable it initialises is {} {}; "
          "name a tensor of the variable's shape (tensor_name_in_ckpt)",
          name, path, dtype_name(value.dtype()), ops::shape_str(value.shape()), dtype_name(dtype),
          ops::shape_str(shape)));
    return value;
  };
}

}  // namespace est::checkpoint
