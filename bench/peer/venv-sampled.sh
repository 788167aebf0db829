#!/usr/bin/env bash
# A venv for PyG's sampled loaders (`NeighborLoader`, `LinkNeighborLoader`), layered over the
# peers' venv (bench/peer/venv.sh) so that one stays as it is. PyG's `NeighborSampler` needs
# `pyg-lib` or `torch-sparse`; PyPI has no `pyg-lib` wheel, and `torch-sparse` 0.6.18 and the
# `torch-scatter` 2.1.2 it imports are source packages, built here against the peers' torch
# 2.2.1, CPU only: about 20 + 4 minutes on 2 cores (MAX_JOBS=1). Not part of the tests or CI.
# Prints the venv's python.
#
#   bench/peer/venv-sampled.sh [venv_dir] [peer_venv_dir]     (default /tmp/peer-sampled, /tmp/peer)
set -euo pipefail
VENV=${1:-/tmp/peer-sampled}
BASE=${2:-/tmp/peer}
cd "$(dirname "$0")"
./venv.sh "$BASE" > /dev/null
if ! "$VENV/bin/python" -c "import torch_sparse, torch_geometric" 2> /dev/null; then
  "$BASE/bin/python" -c "import sys; assert sys.prefix != sys.base_prefix" # a venv, not a system python
  [ -x "$VENV/bin/python" ] || "$("$BASE/bin/python" -c 'import sys; print(sys._base_executable)')" -m venv "$VENV"
  site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$BASE/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$site/peer.pth"
  "$VENV/bin/pip" install --quiet wheel ninja
  for package in "torch-scatter==2.1.2" "torch-sparse==0.6.18"; do
    FORCE_ONLY_CPU=1 MAX_JOBS=${MAX_JOBS:-1} "$VENV/bin/pip" install --quiet --no-build-isolation --no-deps "$package"
  done
fi
echo "$VENV/bin/python"
