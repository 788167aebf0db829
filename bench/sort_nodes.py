"""A node table's rows reordered by label (BENCHMARKS.md section 17, "Locality"), for measuring
what a node order with locality gives GraphInfer's layers: slots follow the table's row order,
and with the generated graph's homophily most in-edges of a class then read rows of its block.

    python3 bench/sort_nodes.py NODES_DIR OUT_DIR

Writes OUT_DIR/part-00000.parquet, ... (no _SUCCESS: a directory of parts is a table), row
groups of 262,144 rows, zstd, as `graphflat generate` writes them. Needs pyarrow (the peers'
venv, bench/peer/venv.sh).
"""
import os
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROWS = 262_144


def main(src, out):
    table = pq.read_table(src)
    table = table.take(pc.sort_indices(table, sort_keys=[("label", "ascending"), ("node_id", "ascending")]))
    os.makedirs(out, exist_ok=True)
    for i, start in enumerate(range(0, table.num_rows, 4 * ROWS)):
        part = table.slice(start, 4 * ROWS)
        pq.write_table(part, os.path.join(out, f"part-{i:05d}.parquet"), row_group_size=ROWS, compression="zstd")
    print(f"{table.num_rows} rows sorted by label into {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
