// doctest's main for every suite. A suite that needs hardware it cannot find exits 77 (meson's
// "skipped") through est::testing::skip().
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
