"""Models between PyTorch and graphflat: :func:`load_model` reads a committed model directory
(GraphTrainer's, or :func:`save_model`'s) into a :class:`~graphflat.pyg.models.GraphModel`;
:func:`save_model` commits a module as a model directory GraphInfer runs.

A model directory holds ``model-<run>.bpk`` (the weights, burn's burnpack format: see
:mod:`graphflat.burnpack`), ``model-<run>.json`` (the model's description, ``ModelMeta`` in the
repository's ``schemas/src/model.rs``: the spec and the settings of the records it was trained
on) and the manifest listing both with their checksums. A parameter named ``layers.<i>.<name>``
in the module is ``layers.<i>.<Variant>.<name>`` in the burnpack file (``Gcn``, ``Sage``,
``Gat``, ``Gine``, ``Rgcn``, ``HeteroSage``); every other name is the same in both.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import torch

from graphflat import burnpack
from graphflat.checked import CheckedFile
from graphflat.commit import commit, new_run_id
from graphflat.guard import kind
from graphflat.manifest import Manifest, read_manifest
from graphflat.meta import RecordsMeta, Relation
from graphflat.paths import filesystem_and_path, join
from graphflat.pyg.learned import LearnedRows
from graphflat.pyg.models import VARIANTS, GraphModel
from graphflat.records import open_records
from graphflat.table import NotCommittedError, read_table

#: The ``format`` of the ``model-<run>.json`` written here (GraphTrainer's).
MODEL_FORMAT = 1
#: The folder of a model's learned embedding table (``gnn::io::LEARNED_FOLDER``).
LEARNED_FOLDER = "embeddings"
_BURN_NAME = re.compile(r"^layers\.(\d+)\.[A-Za-z]+\.(.+)$")


def load_model(path: str, *, filesystem: pafs.FileSystem | None = None, sparse: bool = False) -> GraphModel:
    """The committed model at ``path`` (a local directory or an ``s3://`` URI), in evaluation
    mode. Its files are checked against the manifest (size and CRC-32 of every block).

    A model with learned rows (``[train] learned_embedding_dim``) holds its table
    (``<path>/embeddings``, read whole) as ``model.learned``
    (:class:`~graphflat.pyg.learned.LearnedRows`), with sparse gradients when ``sparse``."""
    manifest = read_manifest(path, filesystem)
    if manifest is None:
        raise NotCommittedError(f"{path}: no committed model (no manifest): not a training output, or not committed")
    if manifest.stage != "train":
        # The words of graphflat.guard, as open_records says a model is not records.
        raise ValueError(
            f"{path} holds {kind(manifest.stage)} (run {manifest.run}), not a model: load_model reads a [train] "
            "output or save_model's"
        )
    fs, root = filesystem_and_path(path, filesystem)
    described = json.loads(_read(fs, root, manifest, ".json"))
    spec = described["spec"]
    learned = None
    if spec.get("learned_embedding_dim", 0):
        # Every part of the table the manifest lists, checked as read_table checks a table; a
        # table of no rows has no part.
        dim = spec["learned_embedding_dim"]
        if any(p.name.startswith(f"{LEARNED_FOLDER}/") for p in manifest.parts):
            table = read_table(f"{path.rstrip('/')}/{LEARNED_FOLDER}", filesystem=filesystem)
            learned = LearnedRows.from_table(table, dim, sparse=sparse)
        else:
            learned = LearnedRows({}, dim, sparse=sparse)
    tensors = burnpack.read(_read(fs, root, manifest, ".bpk"), f"{path} (run {manifest.run})")
    model = GraphModel(spec, records_meta(described), dropout=0.0, learned=learned)
    state = {_torch_name(name): torch.from_numpy(value) for name, value in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.startswith("learned.")]
    if missing or unexpected:
        raise ValueError(
            f"{path}: the weights do not fit the model its description names ({spec['kind']}): "
            f"missing {sorted(missing)}, unexpected {sorted(unexpected)}"
        )
    model.model_meta = described
    return model.eval()


def save_model(
    module: GraphModel,
    path: str,
    records: str,
    *,
    overwrite: bool = False,
    filesystem: pafs.FileSystem | None = None,
) -> str:
    """Commits ``module`` as a model directory at ``path`` that GraphInfer runs, described with
    the settings of the records at ``records`` (which it was trained on); returns the run id.

    Raises ``FileExistsError`` (``CommittedError``) where graphflat's rule refuses
    (:mod:`graphflat.guard`: a committed model there and not ``overwrite``, or any other kind
    of output there, around or inside), ``TypeError`` when ``module`` is not one of this
    package's models, and ``ValueError`` when it does not fit the records (hops, feature
    widths, types) or its weights do not fit the description it would be saved with (each
    tensor's shape against hidden, layers, classes, heads and edge width, named)."""
    if not isinstance(module, GraphModel):
        raise TypeError(
            f"save_model saves this package's models (graphflat.pyg.models: GCN, SAGE, GAT, GINE, RGCN, ...), "
            f"which GraphInfer runs; got a {type(module).__module__}.{type(module).__qualname__}"
        )
    source = open_records(records)
    meta, spec = source.meta, module.spec
    _check_fits(spec, meta, records)
    if spec.get("learned_embedding_dim", 0):
        if module.learned is None:
            raise ValueError("the module reads learned rows and holds none (module.learned) to save as its table")
        types = spec.get("types")
        learned_types = [t["name"] for t in types["node_types"] if t.get("learned", 0)] if types else None
        module.learned.check(spec["learned_embedding_dim"], learned_types, source.keyed_by_strings)
    run = new_run_id()
    # The learned rows are the model's table, not weights.
    state = {
        name: value.detach().cpu().numpy().astype(np.float32)
        for name, value in module.state_dict().items()
        if not name.startswith("learned.")
    }
    variant = "HeteroSage" if spec["kind"] == "sage" and spec.get("types") else VARIANTS[spec["kind"]]
    weights = burnpack.write({_burn_name(name, variant): value for name, value in state.items()})
    _check_weights(module, state, meta)
    described = {
        "format": MODEL_FORMAT,
        "spec": spec,
        "hops": meta.hops,
        "fanouts": list(meta.fanouts),
        "sampler": meta.sampler,
        "flatten_seed": meta.seed,
        "parameters": int(sum(v.size for v in state.values())),
        "relation_fanouts": [list(f) for f in meta.relation_fanouts],
    }
    if meta.task == "link" and meta.typed:
        described["link_relation"] = [r.name for r in meta.relations].index(meta.link_relation)
    files = {
        f"model-{run}.bpk": weights,
        f"model-{run}.json": json.dumps(described, indent=2).encode(),
    }
    rows = {}
    if spec.get("learned_embedding_dim", 0):
        table = module.learned.to_table()
        if table.num_rows:
            name = f"{LEARNED_FOLDER}/part-{run}-00000-00000.parquet"
            files[name], rows[name] = _parquet(table), table.num_rows
    settings = {"producer": "graphflat (Python) save_model", "records": records, "model": spec["kind"]}
    commit(path, run, files, "train", settings, overwrite=overwrite, filesystem=filesystem, rows=rows)
    return run


def records_meta(described: dict[str, Any]) -> RecordsMeta:
    """The settings of the records a model was trained on, from its ``model-<run>.json``."""
    spec, types = described["spec"], described["spec"].get("types")
    names = [t["name"] for t in types["node_types"]] if types else []
    relations = tuple(
        Relation(r["name"], names[r["src"]], names[r["dst"]], r.get("edge_dim", 0))
        for r in (types or {}).get("relations", [])
    )
    link = described.get("link_relation")
    return RecordsMeta(
        task=spec.get("task", "node"),
        hops=described["hops"],
        fanouts=tuple(described["fanouts"]),
        sampler=described["sampler"],
        seed=described["flatten_seed"],
        feature_dim=spec["input_dim"],
        edge_feature_dim=spec.get("edge_dim", 0),
        label="targets" if spec.get("multi_label") else "class",
        classes=spec["classes"] if spec.get("multi_label") else None,
        node_types=tuple((t["name"], t["width"]) for t in types["node_types"]) if types else (),
        relations=relations,
        target_type=names[types["target"]] if types else None,
        relation_fanouts=tuple(tuple(f) for f in described.get("relation_fanouts", [])),
        link_relation=relations[link].name if link is not None else None,
        precomputed=bool(spec.get("precomputed", 0)),
        precomputed_for=spec["kind"] if spec.get("precomputed", 0) else None,
    )


def _check_weights(module: GraphModel, state: dict[str, np.ndarray], meta: RecordsMeta) -> None:
    """Raises ``ValueError`` naming the first tensor of ``state`` (the module's weights, learned
    rows aside) whose shape is not what a model of the module's spec over records of ``meta``
    has (the model GraphInfer and :func:`load_model` would build from the description), or
    that such a model has not, or lacks."""
    reference = GraphModel(module.spec, meta, dropout=0.0, learned=None)
    expected = {n: tuple(v.shape) for n, v in reference.state_dict().items() if not n.startswith("learned.")}
    for name, value in state.items():
        if name not in expected:
            raise ValueError(f"the module's tensor {name} is not a weight of a {module.spec['kind']} model of its spec")
        if tuple(value.shape) != expected[name]:
            raise ValueError(
                f"the module's tensor {name} has shape {list(value.shape)}, where its spec (hidden "
                f"{module.spec.get('hidden')}, {module.spec.get('layers')} layers, {module.spec.get('classes')} classes, "
                f"heads {module.spec.get('heads', 1)}, edge width {module.spec.get('edge_dim', 0)}) makes "
                f"{list(expected[name])}"
            )
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(f"the module lacks the tensors {missing} of a {module.spec['kind']} model of its spec")


def _features_of(meta: RecordsMeta) -> str:
    """What the records' features are, as messages say it."""
    return {"gcn": "Â X", "sage": "[X | mean X]"}.get(meta.precomputed_for or "", "plain")


def _check_fits(spec: dict[str, Any], meta: RecordsMeta, records: str) -> None:
    """Whether a model of ``spec`` reads the records at ``records`` as they are."""
    problems = []
    dense = int(spec.get("precomputed", 0))
    if spec["layers"] != meta.hops + dense:
        problems.append(f"{spec['layers']} layers ({dense} dense) for records of {meta.hops} hops")
    if dense != int(meta.precomputed):
        problems.append(f"precomputed = {dense} for records whose features are {_features_of(meta)}")
    elif dense and meta.precomputed_for not in (None, spec["kind"]):
        problems.append(f"a {spec['kind']} model for records whose features are {_features_of(meta)}")
    if spec.get("task", "node") != meta.task:
        problems.append(f"a {spec.get('task', 'node')} model for {meta.task} records")
    features = spec["input_dim"] - spec.get("learned_embedding_dim", 0)
    if not meta.typed and features != meta.feature_dim:
        problems.append(f"input width {features} for features {meta.feature_dim} wide")
    if spec.get("edge_dim", 0) not in (0, meta.edge_feature_dim):
        problems.append(f"edge width {spec['edge_dim']} for edge features {meta.edge_feature_dim} wide")
    types = spec.get("types")
    if bool(types) != meta.typed:
        problems.append("a typed model for homogeneous records" if types else "a homogeneous model for typed records")
    elif types and [(t["name"], t["width"]) for t in types["node_types"]] != list(meta.node_types):
        problems.append("node types other than the records'")
    if problems:
        raise ValueError(f"the module does not fit the records at {records}: " + "; ".join(problems))


def _read(fs: pafs.FileSystem, root: str, manifest: Manifest, ending: str) -> bytes:
    """The bytes of the model file ending in ``ending`` that the manifest lists, checked."""
    part = next((p for p in manifest.parts if p.name.startswith("model") and p.name.endswith(ending)), None)
    if part is None:
        raise ValueError(f"{root}: the manifest (run {manifest.run}) lists no model*{ending} file")
    with CheckedFile(fs, join(root, part.name), manifest, part) as f:
        return f.read()


def _parquet(table: pa.Table) -> bytes:
    """``table`` as one Parquet file, zstd-compressed as the stages write theirs."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def _torch_name(burn: str) -> str:
    match = _BURN_NAME.match(burn)
    return f"layers.{match[1]}.{match[2]}" if match else burn


def _burn_name(name: str, variant: str) -> str:
    if name.startswith("layers."):
        _, index, rest = name.split(".", 2)
        return f"layers.{index}.{variant}.{rest}"
    return name
