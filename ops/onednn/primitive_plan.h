// A cached oneDNN primitive beside the descriptor it was built from (the kernels read the
// descriptor's memory descs when they run it). Internal to ops/onednn.
#pragma once

#include <dnnl.hpp>

namespace est::ops::onednn {

template <class Primitive>
struct PrimitivePlan {
  typename Primitive::primitive_desc desc;
  Primitive primitive;
};

}  // namespace est::ops::onednn
