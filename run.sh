#!/usr/bin/env bash
# Installs what is missing, configures, builds the default example, then trains it.
set -euo pipefail
cd "$(dirname "$0")"
# Only the program it runs: the tests, benchmarks and tools are ./test.sh's to build.
export EST_BUILD_TARGETS=${EST_BUILD_TARGETS:-examples/mnist_estimator} EST_TEST_TOOLS=${EST_TEST_TOOLS:-0}
source scripts/setup.sh
exec "$BUILD_DIR/examples/mnist_estimator" "$@"
