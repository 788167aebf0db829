"""What a user does without string ids in the pipeline: map a string-keyed graph to int64 ids
with pandas before the job (factorize the node ids, map both edge columns through them) and
write the int tables, then map the output's ids back to strings. Prints each step's seconds.

    python bench/peer/pandas_id_map.py STRINGS_DIR OUT_DIR [SCORES_DIR]
"""

import pathlib
import sys
import time

import pandas as pd
import pyarrow.parquet as pq

src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
t0 = time.perf_counter()
nodes = pq.read_table(src / "nodes").to_pandas()
edges = pq.read_table(src / "edges").to_pandas()
t1 = time.perf_counter()
codes, uniques = pd.factorize(nodes["node_id"])
nodes["node_id"] = codes
index = pd.Index(uniques)
edges["src"] = index.get_indexer(edges["src"])
edges["dst"] = index.get_indexer(edges["dst"])
assert (edges["src"] >= 0).all() and (edges["dst"] >= 0).all()
t2 = time.perf_counter()
for name, frame in [("nodes", nodes), ("edges", edges)]:
    (out / name).mkdir(parents=True, exist_ok=True)
    frame.to_parquet(out / name / "part-0.parquet", index=False)
t3 = time.perf_counter()
back = 0.0
if len(sys.argv) > 3:
    scores = pq.read_table(sys.argv[3]).to_pandas()
    t4 = time.perf_counter()
    scores["node_id"] = uniques[scores["node_id"].to_numpy()]
    back = time.perf_counter() - t4
print(f"read {t1 - t0:.2f} s, map {t2 - t1:.2f} s, write {t3 - t2:.2f} s, map back {back:.2f} s; total {t3 - t0 + back:.2f} s")
