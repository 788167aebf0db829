#!/usr/bin/env bash
# The peers' venv: what a user would run instead of this project, CPU only.
#   torch 2.2.1 (DGL 2.1.0, the newest DGL wheel on PyPI for Python 3.11, ships its graphbolt
#   library for torch up to 2.2.1), DGL 2.1.0, PyG (torch_geometric) 2.8, and pyarrow to read and
#   write the same Parquet.
# About 5 GB (PyPI's torch brings CUDA libraries). Not part of the tests or CI.
#
#   bench/peer/venv.sh [venv_dir]      (default /tmp/peer; the bench scripts read PEER_PYTHON)
set -euo pipefail
VENV=${1:-/tmp/peer}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c "import dgl, torch, torch_geometric, pyarrow" 2> /dev/null ||
  "$VENV/bin/pip" install --quiet "torch==2.2.1" "torchdata==0.7.1" "dgl==2.1.0" "torch_geometric==2.8.*" \
    "pyarrow<20" "numpy<2" "pandas<2.3" pyyaml pydantic psutil
echo "$VENV/bin/python"
