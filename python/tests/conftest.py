"""Fixtures: record sets the graphflat binary flattens (``GRAPHFLAT_BIN``, else the
repository's release build; without one the tests that need them skip)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("GRAPHFLAT_BIN", ROOT / "target" / "release" / "graphflat"))


def graphflat(*args: str) -> None:
    subprocess.run([str(BINARY), *args], check=True, stdout=subprocess.DEVNULL)


def run_job(tmp: Path, name: str, text: str) -> None:
    job = tmp / f"{name}.toml"
    job.write_text(text)
    graphflat("run", str(job))


def scratch(factory, name: str) -> Path:
    """A directory for a fixture's graph; the test skips without a binary to make it."""
    if not BINARY.exists():
        pytest.skip(f"no graphflat binary at {BINARY} (build it, or set GRAPHFLAT_BIN)")
    return factory.mktemp(name)


@pytest.fixture(scope="module")
def node_records(tmp_path_factory) -> Path:
    """Node records of a generated graph with edge features, on two workers (two parts)."""
    tmp = scratch(tmp_path_factory, "node")
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "600", "--feature-dim", "5", "--edge-feature-dim", "3")
    run_job(
        tmp,
        "flatten",
        f"""[cluster]
workers = 2
[flatten]
nodes = "{tmp}/g/nodes"
edges = "{tmp}/g/edges"
output = "{tmp}/flat"
hops = 2
fanouts = [4, 3]
""",
    )
    return tmp / "flat"


@pytest.fixture(scope="module")
def precomputed_records(tmp_path_factory) -> Path:
    """Node records of one hop over a generated graph's ``Â X`` (``[precompute]``'s output,
    ``ax`` beside ``g``), on two workers."""
    return _precomputed(scratch(tmp_path_factory, "precomputed"), "gcn")


@pytest.fixture(scope="module")
def precomputed_sage_records(tmp_path_factory) -> Path:
    """:func:`precomputed_records` over GraphSAGE's ``[X | mean X]`` (still ``ax``)."""
    return _precomputed(scratch(tmp_path_factory, "precomputed-sage"), "sage")


def _precomputed(tmp: Path, model: str) -> Path:
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "600", "--feature-dim", "5")
    run_job(
        tmp,
        "flatten",
        f"""[cluster]
workers = 2
[precompute]
nodes = "{tmp}/g/nodes"
edges = "{tmp}/g/edges"
output = "{tmp}/ax"
model = "{model}"
[flatten]
nodes = "{tmp}/ax"
edges = "{tmp}/g/edges"
output = "{tmp}/flat"
hops = 1
fanouts = [4]
""",
    )
    return tmp / "flat"


def split_graph(tmp: Path) -> None:
    """A generated graph (``g``) with its edges split 80/10/10 (``split``), for link records."""
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "400", "--feature-dim", "4")
    graphflat(
        "split-edges", "--edges", str(tmp / "g/edges"), "--out", str(tmp / "split"), "--valid", "0.1", "--test", "0.1"
    )


@pytest.fixture(scope="module")
def link_records(tmp_path_factory) -> Path:
    tmp = scratch(tmp_path_factory, "link")
    split_graph(tmp)
    run_job(
        tmp,
        "flatten",
        f"""[flatten]
nodes = "{tmp}/g/nodes"
edges = "{tmp}/split"
output = "{tmp}/flat"
task = "link"
negatives = 2
hops = 2
fanouts = [3, 2]
""",
    )
    return tmp / "flat"


@pytest.fixture(scope="module")
def precomputed_link_records(tmp_path_factory) -> Path:
    """Link records of one hop over ``[precompute]``'s ``Â X`` of a split graph (``ax``, ``split``)."""
    tmp = scratch(tmp_path_factory, "precomputed-link")
    split_graph(tmp)
    run_job(
        tmp,
        "flatten",
        f"""[precompute]
nodes = "{tmp}/g/nodes"
edges = "{tmp}/split"
output = "{tmp}/ax"
[flatten]
nodes = "{tmp}/ax"
edges = "{tmp}/split"
output = "{tmp}/flat"
task = "link"
negatives = 2
hops = 1
fanouts = [3]
""",
    )
    return tmp / "flat"


def typed_graph(tmp: Path, buys: Path | None = None) -> str:
    """A generated typed graph in ``tmp/g`` (users, items, shops; buys edges with features)
    as ``[graph]`` keys, also kept in ``tmp/graph.toml``; ``buys`` replaces the buys table."""
    graphflat(
        "generate",
        "--out",
        str(tmp / "g"),
        "--hetero",
        "--nodes",
        "600",
        "--feature-dim",
        "8",
        "--edge-feature-dim",
        "2",
    )
    relations = "".join(
        f'[graph.relations.{name}]\nsrc = "{src}"\ndst = "{dst}"\ntable = "{table}"\nreverse = {rev}\n'
        for name, src, dst, rev, table in [
            ("buys", "user", "item", "true", buys or tmp / "g/edges/buys"),
            ("returns", "user", "item", "false", tmp / "g/edges/returns"),
            ("follows", "user", "user", "false", tmp / "g/edges/follows"),
            ("sells", "shop", "item", "false", tmp / "g/edges/sells"),
        ]
    )
    types = "".join(f'[graph.node_types.{t}]\ntable = "{tmp}/g/nodes/{t}"\n' for t in ("user", "item", "shop"))
    (tmp / "graph.toml").write_text(types + relations)
    return types + relations


@pytest.fixture(scope="module")
def typed_records(tmp_path_factory) -> Path:
    """Node records of a typed graph (``graph.toml`` beside them holds its ``[graph]``)."""
    tmp = scratch(tmp_path_factory, "typed")
    graph = typed_graph(tmp)
    run_job(
        tmp, "flatten", f'{graph}[flatten]\noutput = "{tmp}/flat"\ntarget_type = "user"\nhops = 2\nfanouts = [3, 2]\n'
    )
    return tmp / "flat"


@pytest.fixture(scope="module")
def typed_link_records(tmp_path_factory) -> Path:
    """Link records of a typed graph's buys edges (split into train, valid and test)."""
    tmp = scratch(tmp_path_factory, "typed-link")
    graph = typed_graph(tmp, buys=tmp / "buys")
    graphflat(
        "split-edges",
        "--edges",
        str(tmp / "g/edges/buys"),
        "--out",
        str(tmp / "buys"),
        "--valid",
        "0.1",
        "--test",
        "0.1",
    )
    run_job(
        tmp,
        "flatten",
        f'{graph}[flatten]\noutput = "{tmp}/flat"\ntask = "link"\nlink_relation = "buys"\nnegatives = 2\n'
        "hops = 2\nfanouts = [3, 2]\n",
    )
    return tmp / "flat"


@pytest.fixture(scope="module")
def string_records(tmp_path_factory) -> Path:
    """Link records of a generated graph whose ids are strings (``n<id>``)."""
    tmp = scratch(tmp_path_factory, "strings")
    graphflat("generate", "--out", str(tmp / "g"), "--nodes", "300", "--feature-dim", "3")
    graphflat("split-edges", "--edges", str(tmp / "g/edges"), "--out", str(tmp / "split"), "--valid", "0.1")
    for name, table, columns in [("nodes", tmp / "g/nodes", ["node_id"]), ("edges", tmp / "split", ["src", "dst"])]:
        data = pq.read_table(table)
        for column in columns:
            keys = pc.binary_join_element_wise("n", pc.cast(data[column], pa.string()), "")
            data = data.set_column(data.schema.get_field_index(column), column, keys)
        (tmp / name).mkdir()
        pq.write_table(data, tmp / name / "part-0.parquet")
    run_job(
        tmp,
        "flatten",
        f"""[cluster]
workers = 2
[flatten]
nodes = "{tmp}/nodes"
edges = "{tmp}/edges"
output = "{tmp}/flat"
task = "link"
hops = 2
fanouts = [3, 2]
""",
    )
    return tmp / "flat"
