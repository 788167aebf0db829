"""Writes a Planetoid citation graph (CiteSeer, PubMed) in the OGB raw layout that
`graphflat import ogb` reads (the layout of `../shared/data/cora`), with its public split.

The graph is PyG's reading of Planetoid's files (`torch_geometric.datasets.Planetoid`, which
needs scipy to unpickle them): self-loops removed, duplicate edges merged, CiteSeer's 15
isolated test-range nodes given zero features and label 0 and left out of every split, as in
Kipf and Welling's GCN code. Nothing is downloaded: `raw` is a folder that already holds
Planetoid's `ind.<name>.*` files (for example from a clone of kimiyoung/planetoid's `data/`).

    python bench/planetoid-to-ogb.py CiteSeer /path/to/planetoid/data /tmp/citeseer
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def write_ogb(name: str, raw: Path, out: Path) -> None:
    from torch_geometric.datasets import Planetoid

    with tempfile.TemporaryDirectory() as root:
        staged = Path(root) / name / "raw"
        staged.mkdir(parents=True)
        for f in raw.glob(f"ind.{name.lower()}.*"):
            shutil.copy(f, staged / f.name)
        data = Planetoid(root, name)[0]

    x = data.x.numpy()
    edges = data.edge_index.numpy().T
    (out / "raw").mkdir(parents=True, exist_ok=True)
    (out / "split" / "public").mkdir(parents=True, exist_ok=True)
    write_lines(out / "raw" / "edge.csv.gz", (f"{s},{d}" for s, d in edges))
    # Bag-of-words columns are 0/1 (CiteSeer) or TF-IDF (PubMed): written as the shortest float.
    write_lines(out / "raw" / "node-feat.csv.gz", (",".join(fmt(v) for v in row) for row in x))
    write_lines(out / "raw" / "node-label.csv.gz", (str(int(v)) for v in data.y.numpy()))
    (out / "raw" / "num-node-list.csv").write_text(f"{x.shape[0]}\n")
    (out / "raw" / "num-edge-list.csv").write_text(f"{edges.shape[0]}\n")
    for split, mask in [("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)]:
        ids = np.flatnonzero(mask.numpy())
        write_lines(out / "split" / "public" / f"{split}.csv.gz", (str(i) for i in ids))
    print(f"{name}: {x.shape[0]} nodes, {edges.shape[0]} edges, {x.shape[1]} features, "
          f"{int(data.y.max()) + 1} classes, split {int(data.train_mask.sum())}/"
          f"{int(data.val_mask.sum())}/{int(data.test_mask.sum())} -> {out}")


def fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def write_lines(path: Path, lines) -> None:
    with gzip.open(path, "wt") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    write_ogb(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
