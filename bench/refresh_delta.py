"""Day 2 of a generated graph for bench/refresh.sh: the node table as it is (a link to day 1's)
and the edge table with `fraction` of its edges replaced by as many new random edges (training
edges where the table has a `split` column), either
anywhere (`random`) or with both ends among 1% of the nodes (`concentrated`); and the same change
as an edge delta table (`DAY2/delta/edges`, schemas/README.md's "Delta tables"): for every
`(src, dst)` whose edges changed, its day-2 edges upserted, or a delete where it has none left.

    python bench/refresh_delta.py DAY1 DAY2 FRACTION random|concentrated SEED
"""
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main(day1: str, day2: str, fraction: float, how: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    edges = pq.read_table(os.path.join(day1, "edges"))
    nodes = pq.read_table(os.path.join(day1, "nodes"), columns=["node_id"]).column(0).to_numpy()
    m = edges.num_rows
    k = max(1, round(m * fraction))
    pool = nodes if how == "random" else rng.choice(nodes, max(1, len(nodes) // 100), replace=False)
    if how == "random":
        gone = rng.choice(m, k, replace=False)
    else:
        # Edges whose destination is in the pool, as many as there are (at most k).
        dst = edges.column("dst").to_numpy()
        hit = np.flatnonzero(np.isin(dst, pool))
        gone = rng.choice(hit, min(k, len(hit)), replace=False)
    keep = np.ones(m, bool)
    keep[gone] = False
    added = with_schema(
        pa.table(
            {
                "src": pa.array(rng.choice(pool, k), pa.int64()),
                "dst": pa.array(rng.choice(pool, k), pa.int64()),
                "weight": pa.array(np.ones(k, np.float32)),
                # A link job's edge table has a split: the new edges are training edges.
                "split": pa.array(["train"] * k, pa.string()),
            }
        ),
        edges.schema,
    )
    os.makedirs(os.path.join(day2, "edges"), exist_ok=True)
    today = pa.concat_tables([edges.filter(pa.array(keep)), added])
    pq.write_table(today, os.path.join(day2, "edges", "part-0.parquet"))
    write_delta(edges.take(pa.array(gone)), added, today, int(nodes.max()) + 1, os.path.join(day2, "delta", "edges"))
    if not os.path.exists(os.path.join(day2, "nodes")):
        os.symlink(os.path.abspath(os.path.join(day1, "nodes")), os.path.join(day2, "nodes"))
    print(f"{how}: {len(gone)} of {m} edges removed, {k} added")


def with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table`'s columns that `schema` names, in its order and types; nulls for those it lacks."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def write_delta(removed: pa.Table, added: pa.Table, today: pa.Table, n: int, out: str) -> None:
    """The edge delta from the edges `removed` and `added` to `today` (ids below `n`)."""
    pair = lambda t: t.column("src").to_numpy() * n + t.column("dst").to_numpy()
    changed = np.union1d(pair(removed), pair(added))
    upserts = today.filter(pa.array(np.isin(pair(today), changed)))
    gone = np.setdiff1d(changed, pair(upserts))
    deletes = with_schema(
        pa.table({"src": gone // n, "dst": gone % n, "weight": np.ones(len(gone), np.float32)}), today.schema
    )
    ops = ["upsert"] * upserts.num_rows + ["delete"] * len(gone)
    delta = pa.concat_tables([upserts, deletes]).append_column("op", pa.array(ops, pa.string()))
    os.makedirs(out, exist_ok=True)
    pq.write_table(delta, os.path.join(out, "part-0.parquet"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
