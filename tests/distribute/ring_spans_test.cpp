// Ring::all_reduce_sum over spans (the tensors of a pack summed where they are, without the
// copy into one buffer): bitwise the sums of the concatenated buffer on every task, and
// CollectiveAllReduce's packs of tensors that share memory still give each its own sum.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster/cluster_runtime.h"
#include "distribute/collectives/collective_all_reduce.h"
#include "distribute/net/coordination_client.h"
#include "distribute/net/ring.h"
#include "ops/tensor.h"
#include "tests/distribute/loopback_runtime.h"

namespace est::distribute {
namespace {

// body(runtime) on one thread per task of a loopback cluster of `workers`; the results by rank.
template <class Result>
std::vector<Result> on_tasks(int workers, const std::function<Result(ClusterRuntime&)>& body) {
  return testing::run_tasks<Result>(testing::loopback_cluster(workers, false), body);
}

// Values whose float sums depend on the order of the additions.
std::vector<float> values_of(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = 1.0f / static_cast<float>(3 + (i + static_cast<size_t>(rank) * 7) % 101) +
           static_cast<float>(rank) * 1e4f;
  return v;
}

}  // namespace

TEST_CASE("ring all-reduce over spans: bitwise the sums of the concatenated buffer") {
  // Spans around the chunks: empty ones, one smaller than a chunk, one over two chunks.
  const std::vector<size_t> sizes = {
      0, 3, Ring::kChunkBytes / 4 + 5, 0, 1000, Ring::kChunkBytes / 2 + 1, 1};
  size_t total = 0;
  for (size_t n : sizes) total += n;
  for (int workers : {2, 3}) {
    CAPTURE(workers);
    struct Out {
      std::vector<float> whole, pieces;
    };
    auto results = on_tasks<Out>(workers, [&](ClusterRuntime& runtime) {
      Out out;
      out.whole = values_of(runtime.rank(), total);
      std::vector<std::vector<float>> parts;
      for (size_t offset = 0; size_t n : sizes) {
        parts.emplace_back(out.whole.begin() + static_cast<ptrdiff_t>(offset),
                           out.whole.begin() + static_cast<ptrdiff_t>(offset + n));
        offset += n;
      }
      runtime.ring().all_reduce_sum(out.whole.data(), total, ops::DType::kF32, "whole");
      std::vector<std::pair<void*, size_t>> spans;
      for (auto& part : parts) spans.emplace_back(part.data(), part.size());
      runtime.ring().all_reduce_sum(spans, ops::DType::kF32, "spans");
      for (const auto& part : parts) out.pieces.insert(out.pieces.end(), part.begin(), part.end());
      return out;
    });
    for (const Out& out : results) {
      REQUIRE(out.pieces.size() == total);
      CHECK(std::memcmp(out.pieces.data(), out.whole.data(), total * sizeof(float)) == 0);
      CHECK(std::memcmp(out.whole.data(), results[0].whole.data(), total * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("ring all-reduce after an all-gather of odd sizes: sums added out of shared memory") {
  // The all-gather leaves the shared-memory stream at odd byte positions, so the chunks the
  // reduce-scatter adds straight out of the channel are not aligned for their numbers.
  const size_t n = Ring::kChunkBytes / 4 * 2 + 7;
  struct Out {
    std::vector<float> f;
    std::vector<double> d;
    uint64_t inline_collectives = 0;
  };
  auto results = on_tasks<Out>(2, [&](ClusterRuntime& runtime) {
    Out out;
    out.f = values_of(runtime.rank(), n);
    out.d.assign(out.f.begin(), out.f.end());
    for (double& x : out.d) x /= 3;
    auto gathered = runtime.ring().all_gather(std::string(5 + runtime.rank(), 'x'), "odd");
    REQUIRE(gathered.size() == 2);
    runtime.ring().all_reduce_sum(out.f.data(), n, ops::DType::kF32, "floats");
    runtime.ring().all_gather("abc", "odd again");
    runtime.ring().all_reduce_sum(out.d.data(), n, ops::DType::kF64, "doubles");
    out.inline_collectives = runtime.ring().inline_collectives();
    return out;
  });
  std::vector<float> f0 = values_of(0, n), f1 = values_of(1, n);
  for (const Out& out : results) {
    CHECK(out.inline_collectives > 0);  // the collectives went through shared memory
    size_t wrong_f = 0, wrong_d = 0;
    for (size_t i = 0; i < n; ++i) {
      wrong_f += out.f[i] != f0[i] + f1[i];
      wrong_d += out.d[i] != double(f0[i]) / 3 + double(f1[i]) / 3;
    }
    CHECK(wrong_f == 0);
    CHECK(wrong_d == 0);
  }
}

TEST_CASE("CollectiveAllReduce: tensors of one pack that share memory each get their own sum") {
  // Summed where they are, a buffer listed twice would be added into twice; a copy of the pack
  // gives each entry the sum of the tensor's values.
  for (int workers : {2, 3}) {
    CAPTURE(workers);
    auto results = on_tasks<std::vector<float>>(workers, [](ClusterRuntime& runtime) {
      std::shared_ptr<ClusterRuntime> handle(&runtime, [](ClusterRuntime*) {});
      CollectiveAllReduce ops(handle, CommunicationOptions{});
      Tensor a = Tensor::full({4}, 1.0 + runtime.rank());
      Tensor c = Tensor::full({3}, 10.0);
      std::vector<Tensor> sums{a, c, a};  // a twice: one buffer
      ops.reduce_across_workers(sums, "aliased");
      std::vector<float> out;
      for (const Tensor& t : sums)
        for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<float>()[i]);
      return out;
    });
    float a_sum = 0;
    for (int r = 0; r < workers; ++r) a_sum += 1.0f + static_cast<float>(r);
    float c_sum = 10.0f * static_cast<float>(workers);
    std::vector<float> expected = {a_sum, a_sum, a_sum, a_sum, c_sum, c_sum,
                                   c_sum, a_sum, a_sum, a_sum, a_sum};
    for (const auto& out : results) CHECK(out == expected);
  }
}

}  // namespace est::distribute
