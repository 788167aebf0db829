//! The record table's columns, its Arrow schema, and the flatten settings it carries as
//! metadata.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Metadata, Schema};

use crate::edge_stats::{EdgeStats, StatsPart};
use crate::label::LabelKind;
use crate::layers::Layers;
use crate::nodes::Precomputed;
use crate::sampler::Sampler;
use crate::task::{LinkSpec, NegativeSampler, Task};
use crate::typed::GraphTypes;

pub const ROOT_ID: &str = "root_id";
pub const LABEL: &str = "label";
pub const SPLIT: &str = "split";
pub const NODE_IDS: &str = "node_ids";
/// Records of a graph keyed by strings: each node's original string, aligned with `node_ids`
/// (which hold the internal ids, `crate::ids`); absent for integer ids.
pub const NODE_KEYS: &str = "node_keys";
pub const NODE_HOPS: &str = "node_hops";
pub const NODE_IN_DEGREES: &str = "node_in_degrees";
pub const NODE_FEATURES: &str = "node_features";
pub const EDGE_SRC: &str = "edge_src";
pub const EDGE_DST: &str = "edge_dst";
pub const EDGE_WEIGHTS: &str = "edge_weights";
pub const EDGE_LAYERS: &str = "edge_layers";
/// Present only when the edge table has features: `edge_dim` values per edge, aligned with
/// `edge_src` / `edge_dst`.
pub const EDGE_FEATURES: &str = "edge_features";
/// Typed records: each node's type, an index into the `graphflat.node_types` metadata list.
pub const NODE_TYPES: &str = "node_types";
/// Typed records: each edge's relation, an index into the `graphflat.relations` metadata list.
pub const EDGE_RELATIONS: &str = "edge_relations";

/// Records flattened with `[flatten] root_neighbors = true`: the source of every in-edge of the
/// root over the message-passing edges (one entry an in-edge, parallel edges repeated), in
/// sampling-key order, so the root's sampled in-edges are its first ones. Control-variate
/// training reads the histories of all of them (`docs/control-variates.md`).
pub const ROOT_NEIGHBORS: &str = "root_neighbors";

/// Link records: the supervision edge's source and destination.
pub const LINK_SRC: &str = "link_src";
pub const LINK_DST: &str = "link_dst";
/// Link records: the negative destinations drawn for the edge, in draw order.
pub const NEGATIVES: &str = "negatives";
/// Link records: how many of the row's nodes (and edges) each endpoint's neighborhood holds,
/// in endpoint order: source, destination, then each negative.
pub const ENDPOINT_NODES: &str = "endpoint_nodes";
pub const ENDPOINT_EDGES: &str = "endpoint_edges";

/// Schema-level metadata keys: the flatten settings a record set was made with.
pub mod meta {
    pub const HOPS: &str = "graphflat.hops";
    pub const FANOUTS: &str = "graphflat.fanouts";
    pub const SAMPLER: &str = "graphflat.sampler";
    pub const SEED: &str = "graphflat.seed";
    pub const FEATURE_DIM: &str = "graphflat.feature_dim";
    /// `class` or `targets:<n>`; absent means `class`.
    pub const LABEL: &str = "graphflat.label";
    /// Width of `edge_features`; absent means the records have none.
    pub const EDGE_FEATURE_DIM: &str = "graphflat.edge_feature_dim";
    /// Per-column mean and standard deviation of the whole edge table's features
    /// (comma-separated; see `crate::edge_stats`).
    pub const EDGE_FEATURE_MEAN: &str = "graphflat.edge_feature_mean";
    pub const EDGE_FEATURE_STD: &str = "graphflat.edge_feature_std";
    /// `node` or `link`; absent means `node`.
    pub const TASK: &str = "graphflat.task";
    /// Link records: the `[flatten]` link keys.
    pub const NEGATIVES: &str = "graphflat.negatives";
    pub const NEGATIVE_SAMPLER: &str = "graphflat.negative_sampler";
    pub const DISJOINT_TRAIN: &str = "graphflat.disjoint_train";
    pub const SUPERVISION_FRACTION: &str = "graphflat.supervision_fraction";
    /// A typed link record set's link relation, by name.
    pub const LINK_RELATION: &str = "graphflat.link_relation";
    /// Typed records: `name:width` per node type, comma-separated (see `crate::typed`).
    pub const NODE_TYPES: &str = "graphflat.node_types";
    /// Typed records: `name:src_type:dst_type` per relation, comma-separated.
    pub const RELATIONS: &str = "graphflat.relations";
    /// Typed records: the roots' node type.
    pub const TARGET_TYPE: &str = "graphflat.target_type";
    /// Typed records: each relation's fanouts (comma-separated, nearest hop first; empty for
    /// every edge), one list per relation, `;`-separated in relation order.
    pub const RELATION_FANOUTS: &str = "graphflat.relation_fanouts";
    /// `strings` for a graph keyed by strings (the records have `node_keys`); absent means
    /// integer ids.
    pub const IDS: &str = "graphflat.ids";
    /// `gcn:1` for records flattened over `[precompute]`'s output (features `Â X`): a model
    /// trained on them has one layer more than their hops, the first dense; absent otherwise.
    pub const PRECOMPUTED: &str = "graphflat.precomputed";
    /// `all` for records with a `root_neighbors` column; absent otherwise.
    pub const ROOT_NEIGHBORS: &str = "graphflat.root_neighbors";
}

pub(super) fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, false)))
}

/// The feature vector type of one node: `fixed_size_list<float32, feature_dim>`.
pub fn feature_type(feature_dim: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, false)), feature_dim as i32)
}

/// The label column's type: `int64`, or `fixed_size_list<float32, n>` for multi-hot targets.
pub fn label_type(kind: LabelKind) -> DataType {
    match kind {
        LabelKind::Class => DataType::Int64,
        LabelKind::Targets(n) => feature_type(n),
    }
}

/// The record table's schema, without metadata; `edge_dim > 0` adds `edge_features`.
pub fn record_fields(feature_dim: usize, label: LabelKind, edge_dim: usize) -> Vec<Field> {
    let mut fields = vec![
        Field::new(ROOT_ID, DataType::Int64, false),
        Field::new(LABEL, label_type(label), true),
        Field::new(SPLIT, DataType::Utf8, true),
        Field::new(NODE_IDS, list_of(DataType::Int64), false),
        Field::new(NODE_HOPS, list_of(DataType::UInt8), false),
        Field::new(NODE_IN_DEGREES, list_of(DataType::Int64), false),
        Field::new(NODE_FEATURES, list_of(feature_type(feature_dim)), false),
        Field::new(EDGE_SRC, list_of(DataType::Int32), false),
        Field::new(EDGE_DST, list_of(DataType::Int32), false),
        Field::new(EDGE_WEIGHTS, list_of(DataType::Float32), false),
        Field::new(EDGE_LAYERS, list_of(DataType::UInt32), false),
    ];
    if edge_dim > 0 {
        fields.push(Field::new(EDGE_FEATURES, list_of(feature_type(edge_dim)), false));
    }
    fields
}

/// A typed record table's schema, without metadata: the node record's columns with
/// `node_features` a `list<float32>` per node (each type's width), `node_types` and
/// `edge_relations` beside the ids and edges, and with `edge_features` a `list<float32>` per
/// edge (each relation's width).
pub fn typed_record_fields(label: LabelKind, edge_features: bool) -> Vec<Field> {
    let mut fields = Vec::new();
    let nested = |name: &str| Field::new(name, list_of(list_of(DataType::Float32)), false);
    for field in record_fields(1, label, usize::from(edge_features)) {
        match field.name().as_str() {
            NODE_FEATURES => fields.push(nested(NODE_FEATURES)),
            EDGE_FEATURES => fields.push(nested(EDGE_FEATURES)),
            EDGE_DST => {
                fields.push(field);
                fields.push(Field::new(EDGE_RELATIONS, list_of(DataType::UInt8), false));
            }
            NODE_IDS => {
                fields.push(field);
                fields.push(Field::new(NODE_TYPES, list_of(DataType::UInt8), false));
            }
            _ => fields.push(field),
        }
    }
    fields
}

/// The link record table's schema, without metadata: the supervision edge, its negatives, the
/// sizes of each endpoint's neighborhood, then the node and edge columns of `node_fields`, a
/// node record schema's ([`record_fields`] or [`typed_record_fields`]): the neighborhoods one
/// after another; edge ends index the row's node list.
pub fn link_record_fields(node_fields: Vec<Field>) -> Vec<Field> {
    let mut fields = vec![
        Field::new(LINK_SRC, DataType::Int64, false),
        Field::new(LINK_DST, DataType::Int64, false),
        Field::new(SPLIT, DataType::Utf8, true),
        Field::new(NEGATIVES, list_of(DataType::Int64), false),
        Field::new(ENDPOINT_NODES, list_of(DataType::Int32), false),
        Field::new(ENDPOINT_EDGES, list_of(DataType::Int32), false),
    ];
    // The node and edge columns, after root_id, label and split.
    fields.extend(node_fields.into_iter().skip(3));
    fields
}

/// The settings a record table was flattened with, kept in its schema metadata so that the
/// trainer and inference need nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct FlattenMeta {
    pub hops: usize,
    /// Nearest hop first; empty when records hold every edge (see `schemas::layers`).
    pub fanouts: Vec<u32>,
    pub sampler: Sampler,
    pub seed: u64,
    pub feature_dim: usize,
    pub label: LabelKind,
    /// Width of `edge_features` (0: the records have none, or they are typed: each relation
    /// has its own width, `GraphTypes`' `edge_dim`).
    pub edge_dim: usize,
    /// The whole edge table's feature statistics (present when `edge_dim > 0`).
    pub edge_stats: Option<EdgeStats>,
    /// Typed records with edge features: each relation's table's statistics, in relation order
    /// (`None` for a relation without features); empty otherwise.
    pub relation_edge_stats: Vec<Option<EdgeStats>>,
    /// Link records: the link task's settings (`None`: node records).
    pub link: Option<LinkSpec>,
    /// Typed records: the graph's node types and relations (`None`: a homogeneous graph).
    /// `feature_dim` is 0 then: each type has its own width.
    pub types: Option<GraphTypes>,
    /// Typed records: each relation's fanouts in the recorded form (see `fanouts`), in
    /// relation order; empty for a homogeneous graph.
    pub relation_fanouts: Vec<Vec<u32>>,
    /// A graph keyed by strings: the records carry each node's original string (`node_keys`).
    pub string_ids: bool,
    /// The node table's features were precomputed (`[precompute]`'s output; see
    /// `meta::PRECOMPUTED`).
    pub precomputed: Option<Precomputed>,
    /// The records list every in-neighbor of their root (`root_neighbors`; see
    /// `meta::ROOT_NEIGHBORS`).
    pub root_neighbors: bool,
}

impl FlattenMeta {
    pub fn task(&self) -> Task {
        if self.link.is_some() { Task::Link } else { Task::Node }
    }

    /// The layer rule the records were flattened with.
    pub fn layers(&self) -> Layers {
        Layers::recorded(self.hops, &self.fanouts)
    }

    /// The layer rule of each relation, in relation order (one rule, [`FlattenMeta::layers`],
    /// for a homogeneous graph).
    pub fn relation_layers(&self) -> Vec<Layers> {
        match &self.types {
            None => vec![self.layers()],
            Some(_) => self.relation_fanouts.iter().map(|f| Layers::recorded(self.hops, f)).collect(),
        }
    }

    pub fn to_metadata(&self) -> Metadata {
        let fanouts: Vec<String> = self.fanouts.iter().map(|f| f.to_string()).collect();
        let mut metadata = Metadata::from([
            (meta::HOPS.to_owned(), self.hops.to_string()),
            (meta::FANOUTS.to_owned(), fanouts.join(",")),
            (meta::SAMPLER.to_owned(), self.sampler.name().to_owned()),
            (meta::SEED.to_owned(), self.seed.to_string()),
            (meta::FEATURE_DIM.to_owned(), self.feature_dim.to_string()),
            (meta::LABEL.to_owned(), self.label.to_text()),
        ]);
        if self.edge_dim > 0 {
            metadata.insert(meta::EDGE_FEATURE_DIM.to_owned(), self.edge_dim.to_string());
        }
        if let Some(stats) = &self.edge_stats {
            let (mean, std) = stats.to_text();
            metadata.insert(meta::EDGE_FEATURE_MEAN.to_owned(), mean);
            metadata.insert(meta::EDGE_FEATURE_STD.to_owned(), std);
        }
        if !self.relation_edge_stats.is_empty() {
            let texts: Vec<(String, String)> = self
                .relation_edge_stats
                .iter()
                .map(|s| s.as_ref().map(EdgeStats::to_text).unwrap_or_default())
                .collect();
            let joined =
                |part: fn(&(String, String)) -> &String| texts.iter().map(part).cloned().collect::<Vec<_>>().join(";");
            metadata.insert(meta::EDGE_FEATURE_MEAN.to_owned(), joined(|t| &t.0));
            metadata.insert(meta::EDGE_FEATURE_STD.to_owned(), joined(|t| &t.1));
        }
        if let Some(types) = &self.types {
            metadata.insert(meta::NODE_TYPES.to_owned(), types.node_types_text());
            metadata.insert(meta::RELATIONS.to_owned(), types.relations_text());
            metadata.insert(meta::TARGET_TYPE.to_owned(), types.target_name().to_owned());
            let fanouts: Vec<String> = self
                .relation_fanouts
                .iter()
                .map(|f| f.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
                .collect();
            metadata.insert(meta::RELATION_FANOUTS.to_owned(), fanouts.join(";"));
        }
        if self.string_ids {
            metadata.insert(meta::IDS.to_owned(), "strings".to_owned());
        }
        if let Some(precomputed) = self.precomputed {
            metadata.insert(meta::PRECOMPUTED.to_owned(), precomputed.value().to_owned());
        }
        if self.root_neighbors {
            metadata.insert(meta::ROOT_NEIGHBORS.to_owned(), "all".to_owned());
        }
        if let Some(link) = &self.link {
            metadata.insert(meta::TASK.to_owned(), Task::Link.name().to_owned());
            metadata.insert(meta::NEGATIVES.to_owned(), link.negatives.to_string());
            metadata.insert(meta::NEGATIVE_SAMPLER.to_owned(), link.negative_sampler.name().to_owned());
            metadata.insert(meta::DISJOINT_TRAIN.to_owned(), link.disjoint_train.to_string());
            metadata.insert(meta::SUPERVISION_FRACTION.to_owned(), link.supervision_fraction.to_string());
            if let (Some(r), Some(types)) = (link.relation, &self.types) {
                metadata.insert(meta::LINK_RELATION.to_owned(), types.relations[usize::from(r)].name.clone());
            }
        }
        metadata
    }

    /// Reads the settings back from a schema's metadata; `None` if any key is missing or bad.
    pub fn from_metadata(metadata: &Metadata) -> Option<Self> {
        Self::read(metadata).ok()
    }

    /// Reads the settings back from a schema's metadata, or says why not: no flatten settings
    /// at all (not a record table), or the key that is missing or bad.
    pub fn read(metadata: &Metadata) -> Result<Self, MetaError> {
        if !metadata.keys().any(|k| k.starts_with("graphflat.")) {
            return Err(MetaError::Missing);
        }
        let keys = Keys(metadata);
        let fanouts: Vec<u32> = match keys.text(meta::FANOUTS)? {
            "" => Vec::new(),
            listed => {
                listed.split(',').map(|f| f.parse().ok()).collect::<Option<_>>().ok_or(MetaError::Bad(meta::FANOUTS))?
            }
        };
        let hops = keys.number(meta::HOPS)? as usize;
        // A fanout of 0 would cut the neighborhood (GraphFlat refuses one), and in a layer rule it
        // marks a dense first layer (`Layers::has_dense_first`).
        if !per_hop(&fanouts, hops) || fanouts.contains(&0) {
            return Err(MetaError::Bad(meta::FANOUTS));
        }
        let (types, relation_fanouts) = keys.types(hops)?;
        let edge_dim = match metadata.get(meta::EDGE_FEATURE_DIM) {
            None => 0,
            Some(_) => keys.number(meta::EDGE_FEATURE_DIM)? as usize,
        };
        let (edge_stats, relation_edge_stats) = keys.edge_stats(edge_dim, types.as_ref())?;
        let link = keys.link(types.as_ref())?;
        Ok(FlattenMeta {
            hops,
            fanouts,
            sampler: Sampler::parse(keys.text(meta::SAMPLER)?).ok_or(MetaError::Bad(meta::SAMPLER))?,
            seed: keys.number(meta::SEED)?,
            feature_dim: keys.number(meta::FEATURE_DIM)? as usize,
            label: match metadata.get(meta::LABEL) {
                None => LabelKind::Class,
                Some(text) => LabelKind::parse(text).ok_or(MetaError::Bad(meta::LABEL))?,
            },
            edge_dim,
            edge_stats,
            relation_edge_stats,
            link,
            types,
            relation_fanouts,
            string_ids: match metadata.get(meta::IDS).map(String::as_str) {
                None => false,
                Some("strings") => true,
                Some(_) => return Err(MetaError::Bad(meta::IDS)),
            },
            precomputed: match metadata.get(meta::PRECOMPUTED) {
                None => None,
                Some(value) => Some(Precomputed::parse(value).ok_or(MetaError::Bad(meta::PRECOMPUTED))?),
            },
            root_neighbors: match metadata.get(meta::ROOT_NEIGHBORS).map(String::as_str) {
                None => false,
                Some("all") => true,
                Some(_) => return Err(MetaError::Bad(meta::ROOT_NEIGHBORS)),
            },
        })
    }
}

/// Whether `fanouts` has one fanout per hop of `hops`, or none (every edge): what `layers`
/// reads.
fn per_hop(fanouts: &[u32], hops: usize) -> bool {
    fanouts.is_empty() || fanouts.len() == hops
}

/// A schema's metadata as [`FlattenMeta::read`] reads it: each key missing or unreadable is
/// [`MetaError::Bad`] naming it.
struct Keys<'a>(&'a Metadata);

impl Keys<'_> {
    fn text(&self, key: &'static str) -> Result<&str, MetaError> {
        self.0.get(key).map(String::as_str).ok_or(MetaError::Bad(key))
    }

    fn number(&self, key: &'static str) -> Result<u64, MetaError> {
        self.text(key)?.parse::<u64>().map_err(|_| MetaError::Bad(key))
    }

    /// A typed graph's types and each relation's fanouts (one per hop of `hops`, or none);
    /// `(None, [])` for a homogeneous graph.
    fn types(&self, hops: usize) -> Result<(Option<GraphTypes>, Vec<Vec<u32>>), MetaError> {
        let Some(node_types) = self.0.get(meta::NODE_TYPES) else { return Ok((None, Vec::new())) };
        let types = GraphTypes::parse(node_types, self.text(meta::RELATIONS)?, self.text(meta::TARGET_TYPE)?)
            .ok_or(MetaError::Bad(meta::NODE_TYPES))?;
        let lists = self.text(meta::RELATION_FANOUTS)?;
        let fanouts: Vec<Vec<u32>> = match types.relations.len() {
            0 => Vec::new(),
            _ => lists
                .split(';')
                .map(|list| match list {
                    "" => Some(Vec::new()),
                    _ => list.split(',').map(|f| f.parse().ok()).collect(),
                })
                .collect::<Option<_>>()
                .ok_or(MetaError::Bad(meta::RELATION_FANOUTS))?,
        };
        if fanouts.len() != types.relations.len() || !fanouts.iter().all(|f| per_hop(f, hops)) {
            return Err(MetaError::Bad(meta::RELATION_FANOUTS));
        }
        Ok((Some(types), fanouts))
    }

    /// The edge features' statistics: the table's (homogeneous, `edge_dim` > 0) or each
    /// relation's (typed, with edge features); none without either key. One key without the
    /// other, or statistics for edges without features, is bad.
    fn edge_stats(
        &self,
        edge_dim: usize,
        types: Option<&GraphTypes>,
    ) -> Result<(Option<EdgeStats>, Vec<Option<EdgeStats>>), MetaError> {
        let (mean, std) = (self.0.get(meta::EDGE_FEATURE_MEAN), self.0.get(meta::EDGE_FEATURE_STD));
        match (mean.zip(std), types) {
            (Some((mean, std)), Some(types)) if types.has_edge_features() => {
                Ok((None, relation_stats(types, mean, std).map_err(stats_key)?))
            }
            (Some((mean, std)), None) if edge_dim > 0 => {
                Ok((Some(EdgeStats::parse(mean, std, edge_dim).map_err(stats_key)?), Vec::new()))
            }
            (None, _) if mean.is_none() && std.is_none() => Ok((None, Vec::new())),
            _ => Err(MetaError::Bad(if std.is_none() { meta::EDGE_FEATURE_STD } else { meta::EDGE_FEATURE_MEAN })),
        }
    }

    /// A link task's settings; `None` for node records (no task key, or `node`).
    fn link(&self, types: Option<&GraphTypes>) -> Result<Option<LinkSpec>, MetaError> {
        let Some(task) = self.0.get(meta::TASK) else { return Ok(None) };
        Ok(match Task::parse(task).ok_or(MetaError::Bad(meta::TASK))? {
            Task::Node => None,
            Task::Link => Some(LinkSpec {
                negatives: self.number(meta::NEGATIVES)? as usize,
                negative_sampler: NegativeSampler::parse(self.text(meta::NEGATIVE_SAMPLER)?)
                    .ok_or(MetaError::Bad(meta::NEGATIVE_SAMPLER))?,
                disjoint_train: self
                    .text(meta::DISJOINT_TRAIN)?
                    .parse()
                    .map_err(|_| MetaError::Bad(meta::DISJOINT_TRAIN))?,
                supervision_fraction: self
                    .text(meta::SUPERVISION_FRACTION)?
                    .parse()
                    .map_err(|_| MetaError::Bad(meta::SUPERVISION_FRACTION))?,
                relation: link_relation(self.0.get(meta::LINK_RELATION), types)?,
            }),
        })
    }
}

/// Each relation's statistics from `;`-separated texts, one per relation in relation order,
/// empty for a relation without edge features.
fn relation_stats(types: &GraphTypes, mean: &str, std: &str) -> Result<Vec<Option<EdgeStats>>, StatsPart> {
    let (means, stds): (Vec<&str>, Vec<&str>) = (mean.split(';').collect(), std.split(';').collect());
    if means.len() != types.relations.len() {
        return Err(StatsPart::Mean);
    }
    if stds.len() != types.relations.len() {
        return Err(StatsPart::Std);
    }
    let each = types.relations.iter().zip(means.into_iter().zip(stds)).map(|(r, (mean, std))| match r.edge_dim {
        0 if !mean.is_empty() => Err(StatsPart::Mean),
        0 if !std.is_empty() => Err(StatsPart::Std),
        0 => Ok(None),
        dim => EdgeStats::parse(mean, std, dim).map(Some),
    });
    each.collect()
}

/// A link record set's relation: named in a typed set (one of its relations), absent in a
/// homogeneous one.
fn link_relation(name: Option<&String>, types: Option<&GraphTypes>) -> Result<Option<u8>, MetaError> {
    match (name, types) {
        (None, None) => Ok(None),
        (Some(name), Some(types)) => match types.relations.iter().position(|r| &r.name == name) {
            Some(r) => Ok(Some(r as u8)),
            None => Err(MetaError::Bad(meta::LINK_RELATION)),
        },
        _ => Err(MetaError::Bad(meta::LINK_RELATION)),
    }
}

/// The metadata key that holds a bad half of the edge statistics.
fn stats_key(part: StatsPart) -> MetaError {
    MetaError::Bad(match part {
        StatsPart::Mean => meta::EDGE_FEATURE_MEAN,
        StatsPart::Std => meta::EDGE_FEATURE_STD,
    })
}

/// Why a schema's metadata holds no flatten settings ([`FlattenMeta::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// No `graphflat.` key: not a record table.
    Missing,
    /// This key is missing or its value is not one GraphFlat writes.
    Bad(&'static str),
}

/// The record table's schema with its flatten settings as metadata.
pub fn record_schema(meta: &FlattenMeta) -> Schema {
    let node_fields = match &meta.types {
        Some(types) => typed_record_fields(meta.label, types.has_edge_features()),
        None => record_fields(meta.feature_dim, meta.label, meta.edge_dim),
    };
    let mut node_fields = node_fields;
    if meta.string_ids {
        let at = node_fields.iter().position(|f| f.name() == NODE_IDS).expect("every record has node_ids") + 1;
        node_fields.insert(at, Field::new(NODE_KEYS, list_of(DataType::Utf8), false));
    }
    let mut fields = if meta.link.is_some() { link_record_fields(node_fields) } else { node_fields };
    if meta.root_neighbors {
        fields.push(Field::new(ROOT_NEIGHBORS, list_of(DataType::Int64), false));
    }
    Schema::new(fields).with_metadata(meta.to_metadata())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let meta = FlattenMeta {
            hops: 2,
            fanouts: vec![10, 5],
            sampler: Sampler::Uniform,
            seed: 7,
            feature_dim: 32,
            label: LabelKind::Targets(121),
            edge_dim: 0,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            link: None,
            types: None,
            relation_fanouts: Vec::new(),
            string_ids: false,
            precomputed: None,
            root_neighbors: false,
        };
        assert_eq!(FlattenMeta::from_metadata(&meta.to_metadata()), Some(meta.clone()));
        let all = FlattenMeta { fanouts: vec![], sampler: Sampler::All, label: LabelKind::Class, ..meta };
        assert_eq!(FlattenMeta::from_metadata(&all.to_metadata()), Some(all.clone()));
        // Record sets written before multi-label support carry class labels.
        let mut old = all.to_metadata();
        old.remove(meta::LABEL);
        assert_eq!(FlattenMeta::from_metadata(&old).map(|m| m.label), Some(LabelKind::Class));
        let precomputed = FlattenMeta { precomputed: Some(Precomputed::Gcn), ..all.clone() };
        let sage = FlattenMeta { precomputed: Some(Precomputed::Sage), ..all.clone() };
        assert_eq!(FlattenMeta::from_metadata(&sage.to_metadata()), Some(sage));
        assert_eq!(FlattenMeta::from_metadata(&precomputed.to_metadata()), Some(precomputed.clone()));
        let mut cut = precomputed.to_metadata();
        cut.insert(meta::FANOUTS.to_owned(), "5,0".to_owned());
        assert_eq!(FlattenMeta::read(&cut), Err(MetaError::Bad(meta::FANOUTS)), "a fanout of 0");
        let mut unknown = precomputed.to_metadata();
        unknown.insert(meta::PRECOMPUTED.to_owned(), "gcn:2".to_owned());
        assert_eq!(FlattenMeta::read(&unknown), Err(MetaError::Bad(meta::PRECOMPUTED)));
        let neighbors = FlattenMeta { root_neighbors: true, ..precomputed.clone() };
        assert_eq!(FlattenMeta::from_metadata(&neighbors.to_metadata()), Some(neighbors.clone()));
        let mut some = neighbors.to_metadata();
        some.insert(meta::ROOT_NEIGHBORS.to_owned(), "5".to_owned());
        assert_eq!(FlattenMeta::read(&some), Err(MetaError::Bad(meta::ROOT_NEIGHBORS)));
        let edges = FlattenMeta {
            edge_dim: 2,
            edge_stats: Some(EdgeStats { mean: vec![0.5, -1.25], std: vec![1.0, 0.1] }),
            ..all
        };
        assert_eq!(FlattenMeta::from_metadata(&edges.to_metadata()), Some(edges.clone()));
        let mut wrong = edges.to_metadata();
        wrong.insert(meta::EDGE_FEATURE_DIM.to_owned(), "3".to_owned());
        assert_eq!(FlattenMeta::from_metadata(&wrong), None, "stats of another width");
        let link = FlattenMeta {
            link: Some(LinkSpec {
                negatives: 3,
                negative_sampler: NegativeSampler::Degree,
                disjoint_train: true,
                supervision_fraction: 0.1,
                relation: None,
            }),
            ..edges
        };
        assert_eq!(FlattenMeta::from_metadata(&link.to_metadata()), Some(link.clone()));
        let mut half = link.to_metadata();
        half.remove(meta::NEGATIVES);
        assert_eq!(FlattenMeta::from_metadata(&half), None, "a link record set without its negatives");
        assert_eq!(FlattenMeta::read(&half), Err(MetaError::Bad(meta::NEGATIVES)));
        let mut bogus = link.to_metadata();
        bogus.insert(meta::TASK.to_owned(), "bogus".to_owned());
        assert_eq!(FlattenMeta::read(&bogus), Err(MetaError::Bad(meta::TASK)));
        assert_eq!(FlattenMeta::read(&wrong), Err(MetaError::Bad(meta::EDGE_FEATURE_MEAN)));
        let foreign = Metadata::from([("pandas".to_owned(), "{}".to_owned())]);
        assert_eq!(FlattenMeta::read(&foreign), Err(MetaError::Missing));
    }

    #[test]
    fn typed_metadata_round_trips() {
        use crate::typed::{NodeType, Relation};
        let types = GraphTypes {
            node_types: vec![NodeType::new("item", 3), NodeType::new("user", 5)],
            relations: vec![Relation::new("buys", 1, 0), Relation::new("rev_buys", 0, 1)],
            target: 1,
        };
        let meta = FlattenMeta {
            hops: 2,
            fanouts: vec![10, 5],
            sampler: Sampler::Uniform,
            seed: 7,
            feature_dim: 0,
            label: LabelKind::Class,
            edge_dim: 0,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            link: None,
            types: Some(types.clone()),
            relation_fanouts: vec![vec![3, 2], vec![10, 5]],
            string_ids: false,
            precomputed: None,
            root_neighbors: false,
        };
        assert_eq!(FlattenMeta::read(&meta.to_metadata()), Ok(meta.clone()));
        assert_eq!(meta.relation_layers()[0], Layers::recorded(2, &[3, 2]));
        let mut short = meta.to_metadata();
        short.insert(meta::RELATION_FANOUTS.to_owned(), "3,2".to_owned());
        assert_eq!(FlattenMeta::read(&short), Err(MetaError::Bad(meta::RELATION_FANOUTS)));
        let schema = record_schema(&meta);
        assert!(schema.field_with_name(NODE_TYPES).is_ok() && schema.field_with_name(EDGE_RELATIONS).is_ok());
        assert!(schema.field_with_name(EDGE_FEATURES).is_err(), "no relation has edge features");

        // buys and rev_buys carry 2 edge features each, with the buys table's statistics.
        let mut featured = types;
        featured.relations.iter_mut().for_each(|r| r.edge_dim = 2);
        let stats = EdgeStats { mean: vec![0.5, -1.25], std: vec![1.0, 0.1] };
        let edges =
            FlattenMeta { types: Some(featured), relation_edge_stats: vec![Some(stats.clone()), Some(stats)], ..meta };
        let text = edges.to_metadata();
        assert_eq!(text[meta::RELATIONS], "buys:user:item:2,rev_buys:item:user:2");
        assert_eq!(text[meta::EDGE_FEATURE_MEAN], "0.5,-1.25;0.5,-1.25");
        assert_eq!(FlattenMeta::read(&text), Ok(edges.clone()));
        let schema = record_schema(&edges);
        let nested = schema.field_with_name(EDGE_FEATURES).unwrap().data_type().to_string();
        assert!(nested.contains("List(") && !nested.contains("FixedSizeList"), "{nested}");
        let mut one = text.clone();
        one.insert(meta::EDGE_FEATURE_MEAN.to_owned(), "0.5,-1.25".to_owned());
        assert_eq!(FlattenMeta::read(&one), Err(MetaError::Bad(meta::EDGE_FEATURE_MEAN)), "one list for two");
        // The error names the key that is wrong.
        for (std, why) in [("1.0,0.1;1.0", "a list short"), ("1.0,0.1;1.0,-0.1", "a negative std"), ("", "empty")] {
            let mut bad = text.clone();
            bad.insert(meta::EDGE_FEATURE_STD.to_owned(), std.to_owned());
            assert_eq!(FlattenMeta::read(&bad), Err(MetaError::Bad(meta::EDGE_FEATURE_STD)), "{why}");
        }
        let mut alone = text.clone();
        alone.remove(meta::EDGE_FEATURE_STD);
        assert_eq!(FlattenMeta::read(&alone), Err(MetaError::Bad(meta::EDGE_FEATURE_STD)), "a mean without its std");
    }
}
