//! Typed (heterogeneous) graphs: node types, each with its own node table and feature width,
//! and relations, each with its own edge table between a source and a destination type.
//!
//! Node ids are unique within a type; the same id in two types is two nodes. Inside a stage a
//! typed node is one `i64` key, its type in the top 8 bits and its id in the low 56
//! ([`pack`]), so that ownership, sampling keys, the rounds and every map keyed by node work on
//! typed graphs unchanged. That bounds a typed graph's ids to `[-2^55, 2^55)` (an id outside
//! is bad input naming its row); a homogeneous graph packs nothing and keeps every `i64` id.
//! Tables and records always hold the plain id and, beside it, the type.
//!
//! Types and relations are numbered by name (sorted), and a reversed relation (`reverse =
//! true`, as PyG's `ToUndirected`) is named `rev_<name>` and numbered among them: the numbers
//! depend only on the job's text, and records and models carry the names with them.

use std::fmt;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::DataType;
use serde::{Deserialize, Serialize};

use crate::Record;
use crate::error::{BadInput, Location};
use crate::ids::IdColumn;
use crate::nodes::NODE_ID;

/// The column naming a row's node type in a typed table the stages write (GraphInfer's output,
/// a model's learned table).
pub const NODE_TYPE: &str = "node_type";

/// The most node types a typed graph can have (the key's type bits, kept non-negative).
pub const MAX_NODE_TYPES: usize = 127;
/// The most relations (reversed ones included): `edge_relations` is a `uint8` per edge.
pub const MAX_RELATIONS: usize = 255;
/// Bits of a typed node's id inside its key.
pub const ID_BITS: u32 = 56;
/// Typed node ids lie in `[-ID_LIMIT, ID_LIMIT)`.
pub const ID_LIMIT: i64 = 1 << (ID_BITS - 1);

/// The key of node `id` of type `node_type`, or `None` when the id is out of the typed range.
pub fn pack(node_type: u8, id: i64) -> Option<i64> {
    if !(-ID_LIMIT..ID_LIMIT).contains(&id) || usize::from(node_type) >= MAX_NODE_TYPES {
        return None;
    }
    Some((i64::from(node_type) << ID_BITS) | (id & ((1 << ID_BITS) - 1)))
}

/// The type and id of a typed node's key ([`pack`]'s inverse).
pub fn unpack(key: i64) -> (u8, i64) {
    ((key >> ID_BITS) as u8, (key << (64 - ID_BITS)) >> (64 - ID_BITS))
}

/// Whether `name` can name a type or relation: ASCII letters, digits and `_`, starting with a
/// letter (names travel in metadata lists and column names).
pub fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A node type as records and models know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeType {
    pub name: String,
    /// Its feature width (every node of the type has this many; 0: its table has none).
    pub width: usize,
    /// In a model: the width of the learned embedding each node of the type reads after its
    /// features (`[train] learned_embedding_dim`, for the types `learned_embedding_types`
    /// names); 0: none. Records do not carry it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub learned: usize,
}

impl NodeType {
    /// A type of `width` features, without a learned embedding.
    pub fn new(name: &str, width: usize) -> Self {
        NodeType { name: name.to_owned(), width, learned: 0 }
    }

    /// The width of its rows as a model's input projection reads them: the features, then the
    /// learned embedding.
    pub fn input_width(&self) -> usize {
        self.width + self.learned
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A relation as records and models know it: messages flow from `src`-type nodes into
/// `dst`-type nodes along its edges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    pub name: String,
    pub src: u8,
    pub dst: u8,
    /// Its edge features' width (0: none). In a record set, the width of its edges'
    /// `edge_features` (a reversed relation has its forward relation's); in a model, the width
    /// its layers read (0 when the model leaves them out).
    #[serde(default)]
    pub edge_dim: usize,
}

impl Relation {
    /// A relation without edge features.
    pub fn new(name: &str, src: u8, dst: u8) -> Self {
        Relation { name: name.to_owned(), src, dst, edge_dim: 0 }
    }
}

/// The types of a typed graph: what a record set or a model needs to read typed nodes and
/// edges (written as the record metadata's `graphflat.node_types`, `graphflat.relations` and
/// `graphflat.target_type`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphTypes {
    pub node_types: Vec<NodeType>,
    pub relations: Vec<Relation>,
    /// The type whose nodes are the records' roots.
    pub target: u8,
}

impl GraphTypes {
    /// `user:16,merchant:8`: each type's name and width, in type order.
    pub fn node_types_text(&self) -> String {
        let items: Vec<String> = self.node_types.iter().map(|t| format!("{}:{}", t.name, t.width)).collect();
        items.join(",")
    }

    /// `pays:user:merchant:4,rev_pays:merchant:user:4,follows:user:user`: each relation's
    /// name, source and destination type, and its edge feature width when it has features, in
    /// relation order.
    pub fn relations_text(&self) -> String {
        // A type out of range (a damaged model description) shows as `?`: this text names it in errors.
        let name = |t: u8| self.node_types.get(usize::from(t)).map_or("?", |n| n.name.as_str());
        let items: Vec<String> = self
            .relations
            .iter()
            .map(|r| {
                let text = format!("{}:{}:{}", r.name, name(r.src), name(r.dst));
                if r.edge_dim > 0 { format!("{text}:{}", r.edge_dim) } else { text }
            })
            .collect();
        items.join(",")
    }

    /// Whether some relation has edge features.
    pub fn has_edge_features(&self) -> bool {
        self.relations.iter().any(|r| r.edge_dim > 0)
    }

    /// Reads the three texts back; `None` when one is not what [`GraphTypes`] writes.
    pub fn parse(node_types: &str, relations: &str, target: &str) -> Option<Self> {
        let node_types: Vec<NodeType> = node_types
            .split(',')
            .map(|item| {
                let (name, width) = item.split_once(':')?;
                let width = width.parse().ok()?;
                valid_name(name).then(|| NodeType::new(name, width))
            })
            .collect::<Option<_>>()?;
        if node_types.len() > MAX_NODE_TYPES {
            return None;
        }
        let index = |name: &str| node_types.iter().position(|t| t.name == name).map(|i| i as u8);
        let relations: Vec<Relation> = match relations {
            "" => Vec::new(),
            listed => listed
                .split(',')
                .map(|item| {
                    let mut parts = item.split(':');
                    let (name, src, dst) = (parts.next()?, parts.next()?, parts.next()?);
                    let edge_dim = match parts.next() {
                        None => 0,
                        Some(width) => width.parse().ok().filter(|&w| w > 0)?,
                    };
                    let relation = Relation { name: name.to_owned(), src: index(src)?, dst: index(dst)?, edge_dim };
                    (parts.next().is_none() && valid_name(name)).then_some(relation)
                })
                .collect::<Option<_>>()?,
        };
        if relations.len() > MAX_RELATIONS {
            return None;
        }
        Some(GraphTypes { target: index(target)?, node_types, relations })
    }

    pub fn target_name(&self) -> &str {
        &self.node_types[usize::from(self.target)].name
    }

    /// Type `t`'s feature width.
    pub fn width(&self, t: u8) -> usize {
        self.node_types[usize::from(t)].width
    }

    /// What is wrong with a typed record against these types, if anything, and the column it
    /// is in: a root of another type than `root_type` (the target type for a node record, the
    /// link relation's source or destination type for a link record's endpoint), a node type
    /// or relation out of range, an id outside the typed range, a node whose features are not its type's width, an edge whose
    /// endpoints are not of its relation's source and destination types or whose features are
    /// not its relation's width. The record's own shape (a type per node, a relation per edge)
    /// is checked where it is decoded.
    pub fn check_record(&self, r: &Record, root_type: u8) -> Result<(), (&'static str, String)> {
        use crate::record::{EDGE_FEATURES, EDGE_RELATIONS, NODE_FEATURES, NODE_IDS, NODE_TYPES};
        let root = r.root;
        for (i, &t) in r.node_types.iter().enumerate() {
            let Some(node_type) = self.node_types.get(usize::from(t)) else {
                let problem =
                    format!("root {root}: node {i} has type {t}; the set has {} types", self.node_types.len());
                return Err((NODE_TYPES, problem));
            };
            if pack(t, r.node_ids[i]).is_none() {
                let problem = format!("root {root}: node {i} has id {}, outside [-2^55, 2^55)", r.node_ids[i]);
                return Err((NODE_IDS, problem));
            }
            if i == 0 && t != root_type {
                let expected = self.node_types.get(usize::from(root_type)).map_or("?", |t| t.name.as_str());
                return Err((NODE_TYPES, format!("root {root} is a {}, not a {expected}", node_type.name)));
            }
            let found = r.node_features(i).len();
            if found != node_type.width {
                let problem = format!(
                    "root {root}: node {i} ({}) has {found} features, its type {}",
                    node_type.name, node_type.width
                );
                return Err((NODE_FEATURES, problem));
            }
        }
        for (j, &rel) in r.edge_relations.iter().enumerate() {
            let Some(relation) = self.relations.get(usize::from(rel)) else {
                let problem = format!("root {root}: edge {j} has relation {rel}; the set has {}", self.relations.len());
                return Err((EDGE_RELATIONS, problem));
            };
            let (src, dst) = (r.node_types[r.edge_src[j] as usize], r.node_types[r.edge_dst[j] as usize]);
            if (src, dst) != (relation.src, relation.dst) {
                let name = |t: u8| self.node_types[usize::from(t)].name.as_str();
                let problem = format!(
                    "root {root}: edge {j} of relation {} joins a {} to a {}, not a {} to a {}",
                    relation.name,
                    name(src),
                    name(dst),
                    name(relation.src),
                    name(relation.dst)
                );
                return Err((EDGE_RELATIONS, problem));
            }
            let found = if r.edge_feature_at.is_empty() { 0 } else { r.edge_features_of(j).len() };
            if found != relation.edge_dim {
                let problem = format!(
                    "root {root}: edge {j} of relation {} has {found} edge features, its relation {}",
                    relation.name, relation.edge_dim
                );
                return Err((EDGE_FEATURES, problem));
            }
        }
        Ok(())
    }
}

impl fmt::Display for GraphTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "types {} and relations {}", self.node_types_text(), self.relations_text())
    }
}

/// The rows' typed keys: each row's `node_type` one of `names` (the node types of `whose`: "the
/// model", "the graph"), its id in the typed range. An integer id is packed as itself, a
/// string as its `h` (the stage resolves it against the graph's collided strings).
pub fn typed_keys(
    batch: &RecordBatch,
    ids: &IdColumn,
    names: &[String],
    whose: &str,
    file: &str,
    first_row: u64,
) -> Result<Vec<i64>, BadInput> {
    let at = |r: usize| Location::file(file).row(first_row + r as u64);
    // Any string encoding pandas or polars may write: dictionary (a category), large, view.
    let column = crate::columns::plain(crate::nodes::required(batch, NODE_TYPE, file)?);
    let types: Vec<Option<&str>> = match column.data_type() {
        DataType::Utf8 => column.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => column.as_string::<i64>().iter().collect(),
        DataType::Utf8View => column.as_string_view().iter().collect(),
        other => {
            let problem = format!("expected utf8 node type names, found {other}");
            return Err(BadInput::new(Location::file(file).column(NODE_TYPE), problem));
        }
    };
    (0..batch.num_rows())
        .map(|r| {
            let Some(t) = types[r].and_then(|n| names.iter().position(|known| known == n)) else {
                let found = types[r].map_or_else(|| "a null".to_owned(), |n| format!("{n:?} is no"));
                let problem = format!("{found} node type of {whose} ({})", names.join(", "));
                return Err(BadInput::new(at(r).column(NODE_TYPE), problem));
            };
            // An integer id reads as itself, a string as its `h` (the stage resolves it).
            let id = ids.hashed(r);
            pack(t as u8, id).ok_or_else(|| {
                BadInput::new(at(r).column(NODE_ID), format!("node id {id} is outside a typed graph's range"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_over_the_typed_range() {
        for t in [0u8, 1, 7, 126] {
            for id in [0, 1, -1, 42, -42, ID_LIMIT - 1, -ID_LIMIT, 1 << 40, -(1 << 40)] {
                let key = pack(t, id).unwrap();
                assert_eq!(unpack(key), (t, id), "type {t}, id {id}");
                assert!(key >= 0, "types keep the key's sign bit clear: {key}");
            }
        }
        assert_eq!(pack(0, ID_LIMIT), None);
        assert_eq!(pack(0, -ID_LIMIT - 1), None);
        assert_eq!(pack(127, 0), None);
        assert_ne!(pack(1, 5), pack(2, 5), "one id in two types is two nodes");
    }

    fn merchants_and_users() -> GraphTypes {
        GraphTypes {
            node_types: vec![NodeType::new("merchant", 8), NodeType::new("user", 16)],
            relations: vec![Relation { edge_dim: 4, ..Relation::new("pays", 1, 0) }, Relation::new("rev_pays", 0, 1)],
            target: 1,
        }
    }

    #[test]
    fn types_round_trip_through_their_text() {
        let types = merchants_and_users();
        assert_eq!(types.node_types_text(), "merchant:8,user:16");
        assert_eq!(types.relations_text(), "pays:user:merchant:4,rev_pays:merchant:user");
        let back = GraphTypes::parse(&types.node_types_text(), &types.relations_text(), "user");
        assert_eq!(back, Some(types));
        // A type of no features (its table has no `features` column) has width 0.
        assert_eq!(GraphTypes::parse("a:0", "", "a").map(|t| t.width(0)), Some(0));
        assert_eq!(GraphTypes::parse("a:x", "", "a"), None, "a width that is no number");
        assert_eq!(GraphTypes::parse("a:3", "r:a:b", "a"), None, "an unknown type");
        assert_eq!(GraphTypes::parse("a:3", "", "b"), None, "an unknown target");
        assert_eq!(GraphTypes::parse("a b:3", "", "a b"), None, "a name with a space");
        assert_eq!(GraphTypes::parse("a:3", "r:a:a:0", "a"), None, "an edge feature width of 0");
        assert_eq!(GraphTypes::parse("a:3", "r:a:a:2:1", "a"), None, "a fifth part");
    }

    /// A user (16 features) paid by a merchant (8 features) over `pays`.
    fn paid() -> Record {
        Record {
            root: 3,
            node_ids: vec![3, 3],
            hops: vec![0, 1],
            in_degrees: vec![1, 0],
            features: vec![0.5; 24],
            edge_src: vec![1],
            edge_dst: vec![0],
            edge_weights: vec![1.0],
            edge_layers: vec![0b11],
            node_types: vec![1, 0],
            feature_at: vec![0, 16, 24],
            edge_relations: vec![1],
            ..Record::default()
        }
    }

    #[test]
    fn typed_records_are_checked_against_their_types() {
        let types = merchants_and_users();
        assert_eq!(types.check_record(&paid(), 1), Ok(()));
        let problem = |r: Record| types.check_record(&r, 1).unwrap_err();
        let root_type = problem(Record { node_types: vec![0, 0], feature_at: vec![0, 8, 16], ..paid() });
        assert_eq!(root_type.0, "node_types");
        assert!(root_type.1.contains("root 3 is a merchant, not a user"), "{}", root_type.1);
        let unknown = problem(Record { node_types: vec![1, 5], ..paid() });
        assert!(unknown.1.contains("node 1 has type 5; the set has 2 types"), "{}", unknown.1);
        let width = problem(Record { features: vec![0.5; 20], feature_at: vec![0, 16, 20], ..paid() });
        assert_eq!(width.0, "node_features");
        assert!(width.1.contains("node 1 (merchant) has 4 features, its type 8"), "{}", width.1);
        let relation = problem(Record { edge_relations: vec![0], ..paid() });
        assert_eq!(relation.0, "edge_relations");
        assert!(
            relation.1.contains("relation pays joins a merchant to a user, not a user to a merchant"),
            "{}",
            relation.1
        );
        let missing = problem(Record { edge_relations: vec![2], ..paid() });
        assert!(missing.1.contains("edge 0 has relation 2; the set has 2"), "{}", missing.1);

        // The user pays the merchant: pays carries 4 edge features, rev_pays none.
        let pays = |features: usize| Record {
            edge_src: vec![0],
            edge_dst: vec![1],
            edge_relations: vec![0],
            edge_features: vec![1.0; features],
            edge_feature_at: vec![0, features as u32],
            ..paid()
        };
        assert_eq!(types.check_record(&pays(4), 1), Ok(()));
        let narrow = problem(pays(3));
        assert_eq!(narrow.0, "edge_features");
        assert!(narrow.1.contains("edge 0 of relation pays has 3 edge features, its relation 4"), "{}", narrow.1);
        let none = problem(Record { edge_features: Vec::new(), edge_feature_at: Vec::new(), ..pays(4) });
        assert!(none.1.contains("has 0 edge features, its relation 4"), "{}", none.1);
        let extra = Record { edge_features: vec![1.0; 2], edge_feature_at: vec![0, 2], ..paid() };
        assert!(problem(extra).1.contains("relation rev_pays has 2 edge features, its relation 0"));
    }

    #[test]
    fn types_travel_in_model_json() {
        let types = merchants_and_users();
        let text = serde_json::to_string(&types).unwrap();
        assert_eq!(serde_json::from_str::<GraphTypes>(&text).unwrap(), types);
    }
}
