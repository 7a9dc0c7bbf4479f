// step_profile (distribute/net/step_profile.h), the split of a multi-worker step that
// bench/multi_worker_bench --profile prints: sums per phase, reset, and nothing recorded while
// EST_STEP_PROFILE is unset (the test suites run without it).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "distribute/net/step_profile.h"

namespace est::distribute {

TEST_CASE("step profile: intervals sum per phase, reset clears them, off records nothing") {
  namespace sp = step_profile;
  REQUIRE(std::getenv("EST_STEP_PROFILE") == nullptr);
  CHECK_FALSE(sp::enabled());
  sp::reset();
  sp::add(sp::kReduce, 300, 100);
  sp::add(sp::kReduce, 200, 50);
  sp::add(sp::kPeerWait, 40, 1);
  sp::Totals totals = sp::totals();
  CHECK(totals.wall_ns[sp::kReduce] == 500);
  CHECK(totals.cpu_ns[sp::kReduce] == 150);
  CHECK(totals.count[sp::kReduce] == 2);
  CHECK(totals.count[sp::kPeerWait] == 1);
  CHECK(totals.count[sp::kBackward] == 0);
  CHECK(std::string(sp::phase_name(sp::kPeerWait)) == "peer_wait");
  CHECK(std::string(sp::phase_name(sp::kPsWait)) == "ps_wait");
  CHECK(std::string(sp::phase_name(sp::kPsApply)) == "ps_apply");
  for (int p = 0; p < sp::kPhases; ++p)
    CHECK(std::string(sp::phase_name(static_cast<sp::Phase>(p))) != "?");
  {
    sp::Scope scope(sp::kUpdate);  // off: not timed
  }
  sp::note_thread("replica");
  CHECK(sp::totals().count[sp::kUpdate] == 0);
  CHECK(sp::threads().empty());
  sp::reset();
  CHECK(sp::totals().wall_ns[sp::kReduce] == 0);
  CHECK(sp::totals().count[sp::kPeerWait] == 0);
  CHECK(sp::thread_cpu_ns() > 0);
  CHECK(sp::wall_ns() > 0);
}

}  // namespace est::distribute
