#!/bin/sh
# Prints the node_modules directory holding onnxruntime-node, installing it first (with npm's
# install scripts off: they fetch GPU binaries from a host these machines cannot reach; the
# CPU runtime ships inside the package) into $1 (an ignored directory: build/npm) when missing.
# Exit 3 with the reason when node, npm or the package cannot be had (the test skips then).
dir=${1:?usage: find_onnxruntime.sh NPM_DIR}
command -v node >/dev/null 2>&1 || { echo "node is not installed (apt-get install nodejs)"; exit 3; }
if [ ! -d "$dir/node_modules/onnxruntime-node" ]; then
  command -v npm >/dev/null 2>&1 || { echo "npm is not installed (apt-get install npm)"; exit 3; }
  mkdir -p "$dir" || exit 3
  if ! (cd "$dir" && timeout 300 npm install --ignore-scripts --no-audit --no-fund \
          onnxruntime-node >install.log 2>&1); then
    echo "npm install onnxruntime-node failed (see $dir/install.log)"; exit 3
  fi
fi
echo "$dir/node_modules"
