// Ring::all_reduce_scaled (the scale applied where the reduce-scatter first reads a task's own
// numbers, the sums written into separate outputs) and CollectiveAllReduce's
// reduce_scaled_across_workers on top of it: the sums are bitwise those of scaling first and
// summing in place, the inputs are left as they were, and inputs that share memory are fine.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/collectives/collective_all_reduce.h"
#include "distribute/net/ring.h"
#include "ops/error.h"
#include "ops/tensor.h"
#include "tests/distribute/loopback_runtime.h"

namespace est::distribute {
namespace {

template <class Result>
std::vector<Result> on_tasks(int workers, const std::function<Result(ClusterRuntime&)>& body) {
  return testing::run_tasks<Result>(testing::loopback_cluster(workers, false), body);
}

// Values whose float sums depend on the order of the additions and on their rounding.
template <class T>
std::vector<T> values_of(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = T(1) / static_cast<T>(3 + (i + static_cast<size_t>(rank) * 7) % 101) +
           static_cast<T>(rank) * T(1e4);
  return v;
}

// Spans around the pipeline's chunks: an empty one, one smaller than a chunk, one over two.
template <class T>
std::vector<size_t> sizes_for() {
  return {3, Ring::kChunkBytes / sizeof(T) + 5, 0, 1000, Ring::kChunkBytes / sizeof(T) / 2 + 1};
}
const std::vector<double> kScales = {0.5, 1.0, 1.0 / 3.0, 1.0, -2.5};

template <class T>
void check_scaled_against_in_place(ops::DType dtype) {
  const std::vector<size_t> sizes = sizes_for<T>();
  size_t total = 0;
  for (size_t n : sizes) total += n;
  for (int workers : {1, 2, 3}) {
    CAPTURE(workers);
    struct Out {
      std::vector<T> in, in_after, scaled, reference;
    };
    auto results = on_tasks<Out>(workers, [&](ClusterRuntime& runtime) {
      Out out;
      out.in = values_of<T>(runtime.rank(), total);
      out.in_after = out.in;
      out.scaled.assign(total, T(-7));  // garbage that must all be overwritten
      // The reference: each span scaled first (x * T(scale)), then summed in place.
      out.reference = out.in;
      std::vector<Ring::ScaledSpan> spans;
      for (size_t offset = 0, s = 0; s < sizes.size(); offset += sizes[s], ++s) {
        for (size_t i = offset; i < offset + sizes[s]; ++i)
          out.reference[i] = out.reference[i] * static_cast<T>(kScales[s]);
        spans.push_back(
            {out.in_after.data() + offset, out.scaled.data() + offset, sizes[s], kScales[s]});
      }
      runtime.ring().all_reduce_sum(out.reference.data(), total, dtype, "reference");
      runtime.ring().all_reduce_scaled(spans, dtype, "scaled");
      return out;
    });
    for (const Out& out : results) {
      CHECK(std::memcmp(out.scaled.data(), out.reference.data(), total * sizeof(T)) == 0);
      CHECK(std::memcmp(out.scaled.data(), results[0].scaled.data(), total * sizeof(T)) == 0);
      CHECK(out.in_after == out.in);  // only read
    }
  }
}

}  // namespace

TEST_CASE("ring all-reduce scaled into separate outputs: bitwise scale-then-sum, inputs kept") {
  SUBCASE("float32") { check_scaled_against_in_place<float>(ops::DType::kF32); }
  SUBCASE("float64") { check_scaled_against_in_place<double>(ops::DType::kF64); }
}

TEST_CASE("ring all-reduce scaled: outputs in place of their inputs, and inputs that overlap") {
  const size_t n = Ring::kChunkBytes / 4 + 9;
  struct Out {
    std::vector<float> in_place, a, b, shared;
  };
  auto results = on_tasks<Out>(2, [&](ClusterRuntime& runtime) {
    Out out;
    out.in_place = values_of<float>(runtime.rank(), n);
    out.shared = values_of<float>(runtime.rank(), n);
    out.a.assign(n, 0.0f);
    out.b.assign(n, 0.0f);
    // One buffer read by two spans with different scales, and a span summed where it is.
    runtime.ring().all_reduce_scaled({{out.shared.data(), out.a.data(), n, 0.25},
                                      {out.in_place.data(), out.in_place.data(), n, 0.5},
                                      {out.shared.data(), out.b.data(), n, 1.0}},
                                     ops::DType::kF32, "overlapping");
    return out;
  });
  std::vector<float> v0 = values_of<float>(0, n), v1 = values_of<float>(1, n);
  for (int rank = 0; rank < 2; ++rank) {
    const Out& out = results[static_cast<size_t>(rank)];
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      wrong += out.a[i] != v0[i] * 0.25f + v1[i] * 0.25f;
      wrong += out.in_place[i] != v0[i] * 0.5f + v1[i] * 0.5f;
      wrong += out.b[i] != v0[i] + v1[i];
    }
    CHECK(wrong == 0);
    CHECK(out.shared == values_of<float>(rank, n));
  }
}

// Two tasks send their scaled numbers three ways: scaled straight into the shared-memory
// channel (the calling thread's sends), staged in the outputs for the sender thread, or over
// TCP; after an all-gather of odd sizes the channel's next byte is not a float's. The sums are
// the same bits every way.
TEST_CASE("ring all-reduce scaled: scaled into the channel, staged, or over TCP: the same bits") {
  const std::vector<size_t> sizes = sizes_for<float>();
  size_t total = 0;
  for (size_t n : sizes) total += n;
  struct Out {
    std::vector<float> scaled, reference;
    uint64_t inline_collectives = 0;
  };
  auto run = [&](bool shared_memory, bool inline_sends, bool odd_start) {
    return testing::run_tasks<Out>(
        testing::loopback_cluster(2, false),
        [&](ClusterRuntime& runtime) {
          Ring& ring = runtime.ring();
          ring.set_inline_sends(inline_sends);
          if (odd_start) ring.all_gather(std::string(3 + runtime.rank(), 'x'), "odd sizes");
          Out out;
          std::vector<float> in = values_of<float>(runtime.rank(), total);
          out.scaled.assign(total, -7.0f);
          out.reference = in;
          std::vector<Ring::ScaledSpan> spans;
          for (size_t offset = 0, s = 0; s < sizes.size(); offset += sizes[s], ++s) {
            for (size_t i = offset; i < offset + sizes[s]; ++i)
              out.reference[i] = out.reference[i] * static_cast<float>(kScales[s]);
            spans.push_back({in.data() + offset, out.scaled.data() + offset, sizes[s], kScales[s]});
          }
          uint64_t before = ring.inline_collectives();
          ring.all_reduce_scaled(spans, ops::DType::kF32, "scaled");
          out.inline_collectives = ring.inline_collectives() - before;
          ring.all_reduce_sum(out.reference.data(), total, ops::DType::kF32, "reference");
          return out;
        },
        shared_memory);
  };
  const std::vector<float> expected = run(false, false, false)[0].reference;
  for (bool shared_memory : {true, false})
    for (bool inline_sends : {true, false})
      for (bool odd_start : {false, true}) {
        CAPTURE(shared_memory);
        CAPTURE(inline_sends);
        CAPTURE(odd_start);
        for (const Out& out : run(shared_memory, inline_sends, odd_start)) {
          CHECK(std::memcmp(out.scaled.data(), expected.data(), total * sizeof(float)) == 0);
          CHECK(std::memcmp(out.reference.data(), expected.data(), total * sizeof(float)) == 0);
          CHECK(out.inline_collectives == (shared_memory && inline_sends ? 1u : 0u));
        }
      }
}

TEST_CASE("CollectiveAllReduce: scaled sums across workers into fresh tensors") {
  for (int workers : {1, 2, 3}) {
    CAPTURE(workers);
    struct Out {
      std::vector<float> sums;
      std::vector<float> inputs_after;
      bool fresh = true;
      std::string error;
    };
    auto results = on_tasks<Out>(workers, [](ClusterRuntime& runtime) {
      std::shared_ptr<ClusterRuntime> handle(&runtime, [](ClusterRuntime*) {});
      // Packs of 16 bytes: the three tensors travel in separate collectives.
      CollectiveAllReduce ops(handle, CommunicationOptions{.bytes_per_pack = 16});
      Tensor a = Tensor::full({4}, 1.0 + runtime.rank());
      Tensor c = Tensor::full({3}, 10.0);
      std::vector<Tensor> inputs{a, c, Tensor(), a};  // a twice (one buffer), one undefined
      std::vector<Tensor> tensors = inputs;
      ops.reduce_scaled_across_workers(tensors, {0.5, 1.0, 1.0, 2.0}, "scaled");
      Out out;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (!inputs[i].defined()) {
          out.fresh = out.fresh && !tensors[i].defined();
          continue;
        }
        out.fresh = out.fresh && !tensors[i].shares_storage(inputs[i]);
        for (int64_t j = 0; j < tensors[i].numel(); ++j)
          out.sums.push_back(tensors[i].data<float>()[j]);
      }
      for (const Tensor& t : {a, c})
        for (int64_t j = 0; j < t.numel(); ++j) out.inputs_after.push_back(t.data<float>()[j]);
      std::vector<Tensor> ints{Tensor::full({2}, 1.0, ops::DType::kI32)};
      try {
        ops.reduce_scaled_across_workers(ints, {1.0}, "ints");
      } catch (const InvalidArgumentError& e) {
        out.error = e.what();
      }
      return out;
    });
    float a_sum = 0;
    for (int r = 0; r < workers; ++r) a_sum += 1.0f + static_cast<float>(r);
    float c_sum = 10.0f * static_cast<float>(workers);
    for (size_t r = 0; r < results.size(); ++r) {
      const Out& out = results[r];
      std::vector<float> expected(4, a_sum * 0.5f);
      expected.insert(expected.end(), 3, c_sum);
      expected.insert(expected.end(), 4, a_sum * 2.0f);
      CHECK(out.sums == expected);
      CHECK(out.fresh);
      std::vector<float> inputs(4, 1.0f + static_cast<float>(r));
      inputs.insert(inputs.end(), 3, 10.0f);
      CHECK(out.inputs_after == inputs);
      if (workers > 1) CHECK(out.error.find("int32") != std::string::npos);
    }
  }
}

}  // namespace est::distribute
