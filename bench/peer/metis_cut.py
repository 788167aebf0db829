"""METIS's edge cut on a node and edge table (int64 ids), and a partition table's, by the same count.

    python bench/peer/metis_cut.py NODES_DIR EDGES_DIR PARTS [PARTITION_DIR]

Prints one JSON object: the edges counted (message-passing rows: split null or "train"), METIS's
cut (pymetis.part_graph, its default k-way scheme and balance, on the graph made undirected with
each pair's rows as its edge weight) and its largest part against the mean, its seconds, and, given
PARTITION_DIR (a `[partition]` output), that table's cut and balance counted the same way. An edge is
cut when its two ends lie in different parts; self-loops never are.
"""

import json
import sys
import time

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pymetis


def read_graph(nodes_dir: str, edges_dir: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The node ids (sorted) and every message-passing edge's two ends as positions among them."""
    ids = np.sort(pq.read_table(nodes_dir, columns=["node_id"]).column("node_id").to_numpy())
    table = pq.read_table(edges_dir)
    if "split" in table.column_names:
        keep = pc.or_kleene(pc.is_null(table["split"]), pc.equal(table["split"], "train"))
        table = table.filter(pc.fill_null(keep, True))
    src = np.searchsorted(ids, table.column("src").to_numpy())
    dst = np.searchsorted(ids, table.column("dst").to_numpy())
    return ids, src, dst


def metis(n: int, src: np.ndarray, dst: np.ndarray, parts: int) -> np.ndarray:
    """pymetis's parts for the undirected graph whose edge weights count the rows of each pair."""
    loops = src == dst
    a = np.concatenate([src[~loops], dst[~loops]])
    b = np.concatenate([dst[~loops], src[~loops]])
    pairs, weights = np.unique(a.astype(np.int64) * n + b, return_counts=True)
    rows, cols = pairs // n, pairs % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.add.at(xadj, rows + 1, 1)
    xadj = np.cumsum(xadj)
    _, membership = pymetis.part_graph(parts, xadj=xadj, adjncy=cols, eweights=weights)
    return np.asarray(membership)


def quality(part: np.ndarray, src: np.ndarray, dst: np.ndarray, parts: int) -> tuple[float, float]:
    """The share of edges cut and the largest part against the mean."""
    cut = float(np.mean(part[src] != part[dst])) if len(src) else 0.0
    sizes = np.bincount(part, minlength=parts)
    return cut, float(sizes.max() * parts / len(part))


def main() -> None:
    nodes_dir, edges_dir, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ids, src, dst = read_graph(nodes_dir, edges_dir)
    started = time.perf_counter()
    part = metis(len(ids), src, dst, parts)
    seconds = time.perf_counter() - started
    cut, balance = quality(part, src, dst, parts)
    out = {"edges": len(src), "metis_cut": cut, "metis_balance": balance, "metis_seconds": seconds}
    if len(sys.argv) > 4:
        table = pq.read_table(sys.argv[4], columns=["node_id", "part"])
        ours = np.full(len(ids), -1)
        ours[np.searchsorted(ids, table.column("node_id").to_numpy())] = table.column("part").to_numpy()
        assert (ours >= 0).all(), "a node without a part"
        out["ours_cut"], out["ours_balance"] = quality(ours, src, dst, parts)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
