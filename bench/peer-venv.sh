#!/usr/bin/env bash
# The peers' venv for the benchmarks that compare against DGL: CPU-only use of torch 2.1 (the
# newest torch that DGL 2.1.0, the newest DGL wheel on PyPI for Python 3.11, is built for),
# pyarrow to read the same Parquet tables. About 3 GB (PyPI's torch brings CUDA libraries).
#
#   bench/peer-venv.sh [venv_dir]      (default /tmp/peer; the bench scripts read PEER_PYTHON)
set -euo pipefail
VENV=${1:-/tmp/peer}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c "import dgl, torch, pyarrow" 2> /dev/null ||
  "$VENV/bin/pip" install --quiet "torch==2.1.2" "torchdata==0.7.1" "dgl==2.1.0" "pyarrow<20" "numpy<2" "pandas<2.3" pyyaml pydantic psutil
echo "$VENV/bin/python"
