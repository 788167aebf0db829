"""The settings a record set was flattened with, from its schema's ``graphflat.*`` metadata.

``schemas/README.md`` in the repository states every key; :class:`RecordsMeta` holds them typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Relation:
    """A relation of a typed graph: its name, source and destination node types, and the width
    of its edges' features (0: none)."""

    name: str
    src: str
    dst: str
    edge_feature_dim: int = 0


@dataclass(frozen=True)
class RecordsMeta:
    """What a record set holds and how it was made.

    Attributes:
        task: ``"node"`` (one record per node) or ``"link"`` (one per supervision edge).
        hops: k, the layers a model of these records has.
        fanouts: in-edges sampled per node, nearest hop first; empty for every in-edge.
        sampler: ``"uniform"``, ``"weighted"``, ``"topk"`` or ``"all"``.
        seed: the sampling seed.
        feature_dim: each node's feature width (0 for typed records: see ``node_types``).
        edge_feature_dim: each edge's feature width; 0 without edge features.
        label: ``"class"`` (an int64 class, -1 or null unlabeled) or ``"targets"`` (multi-hot).
        classes: the width of multi-hot targets; ``None`` for class labels.
        node_types: typed records' node types as (name, feature width), in type order.
        relations: typed records' relations, in relation order.
        target_type: typed records' root type.
        relation_fanouts: typed records' fanouts per relation, in relation order.
        negatives: link records' negatives per edge (0 for node records).
        link_relation: a typed link record set's relation.
        precomputed: the node table's features were precomputed (``[precompute]``'s output): a
            model of these records has ``hops + 1`` layers, the first dense (``x W + b``).
        precomputed_for: the model kind the precomputed features are for: ``"gcn"`` (``Â X``)
            or ``"sage"`` (``[X | mean X]``, twice the width of ``X``); ``None`` for plain ones.
        raw: every ``graphflat.*`` key as written.
    """

    task: str
    hops: int
    fanouts: tuple[int, ...]
    sampler: str
    seed: int
    feature_dim: int
    edge_feature_dim: int = 0
    label: str = "class"
    classes: int | None = None
    node_types: tuple[tuple[str, int], ...] = ()
    relations: tuple[Relation, ...] = ()
    target_type: str | None = None
    relation_fanouts: tuple[tuple[int, ...], ...] = ()
    negatives: int = 0
    link_relation: str | None = None
    precomputed: bool = False
    precomputed_for: str | None = None
    raw: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def typed(self) -> bool:
        """Whether the records are of a typed graph."""
        return bool(self.node_types)

    @staticmethod
    def from_metadata(metadata: Mapping[bytes, bytes], file: str = "records") -> RecordsMeta:
        """The settings in a record table's schema metadata (``file`` names it in errors)."""
        raw = {k.decode(): v.decode() for k, v in (metadata or {}).items() if k.startswith(b"graphflat.")}
        if "graphflat.hops" not in raw:
            raise ValueError(f"{file}: not a record set of graphflat (no graphflat.hops in its schema metadata)")
        label = raw.get("graphflat.label", "class")
        precomputed = raw.get("graphflat.precomputed")
        if precomputed not in (None, "gcn:1", "sage:1"):
            raise ValueError(
                f"{file}: graphflat.precomputed = {precomputed!r}; this graphflat knows only 'gcn:1' and 'sage:1'"
            )
        kind, _, classes = label.partition(":")
        return RecordsMeta(
            task=raw.get("graphflat.task", "node"),
            hops=int(raw["graphflat.hops"]),
            fanouts=_ints(raw.get("graphflat.fanouts", "")),
            sampler=raw.get("graphflat.sampler", "uniform"),
            seed=int(raw.get("graphflat.seed", "0")),
            feature_dim=int(raw.get("graphflat.feature_dim", "0")),
            edge_feature_dim=int(raw.get("graphflat.edge_feature_dim", "0")),
            label=kind,
            classes=int(classes) if classes else None,
            node_types=tuple((n, int(w)) for n, w in (t.split(":") for t in _items(raw.get("graphflat.node_types")))),
            relations=tuple(_relation(r) for r in _items(raw.get("graphflat.relations"))),
            target_type=raw.get("graphflat.target_type"),
            relation_fanouts=tuple(_ints(f) for f in raw["graphflat.relation_fanouts"].split(";"))
            if "graphflat.relation_fanouts" in raw
            else (),
            negatives=int(raw.get("graphflat.negatives", "0")),
            link_relation=raw.get("graphflat.link_relation"),
            precomputed=precomputed is not None,
            precomputed_for=precomputed.partition(":")[0] if precomputed else None,
            raw=raw,
        )


def _items(text: str | None) -> list[str]:
    return [item for item in (text or "").split(",") if item]


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


def _relation(text: str) -> Relation:
    name, src, dst, *width = text.split(":")
    return Relation(name, src, dst, int(width[0]) if width else 0)
