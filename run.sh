#!/usr/bin/env bash
# Installs what is missing, configures, builds, then trains the default example.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
exec "$BUILD_DIR/examples/mnist_estimator" "$@"
