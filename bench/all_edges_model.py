"""Copies a committed model directory with model.json's sampler set to "all" (every in-edge),
and re-commits it: the _SUCCESS manifest gets model.json's new size and CRC-32, as gnn::io
writes them. GraphInfer then runs the same weights over every in-edge.

    python3 bench/all_edges_model.py MODEL_DIR OUT_DIR
"""
import json
import shutil
import sys
import zlib
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
shutil.copy(src / "model.bpk", dst / "model.bpk")
meta = json.loads((src / "model.json").read_text())
meta["sampler"], meta["fanouts"] = "all", []
body = json.dumps(meta).encode()
(dst / "model.json").write_bytes(body)
manifest = json.loads((src / "_SUCCESS").read_text())
for part in manifest["parts"]:
    if part["name"] == "model.json":
        part["bytes"], part["crc32"] = len(body), zlib.crc32(body)
manifest["bytes"] = sum(p["bytes"] for p in manifest["parts"])
(dst / "_SUCCESS").write_text(json.dumps(manifest, indent=2))
