"""How many row groups of GraphFlat's records a day's change touches, by record order and row
group size (BENCHMARKS.md section 25, issue 70's layout lever).

A refresh carries a row group only when it holds no affected record; every other one is decoded,
filtered and encoded again. This counts, for the generated graph and random days like
bench/refresh_delta.py's (a fraction of the edges replaced by as many random new ones), the
affected roots of `hops = 2`, `fanouts = [10, 5]` records (a changed node's own record, and the
records that sample it at hop 1, each in-edge kept with probability min(1, 10 / in-degree)),
and the share of row groups that hold one when records are in hash order (as written today), in
the order of the planted communities (the best a partition table's order can do on this graph),
and packed (the affected records side by side: no order does better).

    python bench/refresh_layout.py GRAPH_DIR [fraction ...]
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow.parquet as pq

FANOUT = 10
ROW_GROUPS = (13_000, 1_000, 100)


def affected_roots(src: np.ndarray, dst: np.ndarray, n: int, fraction: float, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """The changed nodes' count and the affected roots of a day replacing `fraction` of the edges."""
    m = max(1, int(len(src) * fraction))
    removed = rng.choice(len(src), size=m, replace=False)
    changed = np.unique(np.concatenate([dst[removed], rng.integers(0, n, size=m)]))
    in_degree = np.bincount(dst, minlength=n)
    hit = np.isin(src, changed)
    keep = rng.random(int(hit.sum())) < np.minimum(1.0, FANOUT / in_degree[dst[hit]])
    return len(changed), np.unique(np.concatenate([changed, dst[hit][keep]]))


def touched(rows: np.ndarray, n: int, size: int) -> float:
    """The share of row groups of `size` records that hold one of `rows`."""
    return len(np.unique(rows // size)) / -(-n // size)


def main() -> None:
    graph, fractions = sys.argv[1], [float(f) for f in sys.argv[2:]] or [0.00001, 0.0001, 0.001]
    edges = pq.read_table(f"{graph}/edges", columns=["src", "dst"])
    src, dst = edges.column("src").to_numpy(), edges.column("dst").to_numpy()
    nodes = pq.read_table(f"{graph}/nodes", columns=["node_id", "label"])
    ids, labels = nodes.column("node_id").to_numpy(), nodes.column("label").to_numpy()
    n = len(ids)
    assert ids.min() == 0 and ids.max() == n - 1, "ids 0..n-1, as generate writes them"
    label = np.empty(n, dtype=np.int64)
    label[ids] = labels
    rng = np.random.default_rng(1)
    hashed = rng.permutation(n)
    row_by_hash = np.empty(n, dtype=np.int64)
    row_by_hash[hashed] = np.arange(n)
    by_community = np.lexsort((row_by_hash, label))
    row_by_community = np.empty(n, dtype=np.int64)
    row_by_community[by_community] = np.arange(n)
    print(f"{n} nodes, {len(src)} edges, {np.unique(label).size} communities")
    print("| day 2 | changed | affected | row group | hash order | community order | packed |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for fraction in fractions:
        changed, roots = affected_roots(src, dst, n, fraction, rng)
        for size in ROW_GROUPS:
            shares = [touched(order[roots], n, size) for order in (row_by_hash, row_by_community)]
            packed = -(-len(roots) // size) / -(-n // size)
            print(
                f"| {fraction:.3%} of the edges | {changed:,} | {len(roots):,} ({len(roots) / n:.2%}) | {size:,} "
                f"| {shares[0]:.1%} | {shares[1]:.1%} | {packed:.1%} |"
            )


if __name__ == "__main__":
    main()
