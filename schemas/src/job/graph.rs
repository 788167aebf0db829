//! The `[graph]` table: a typed (heterogeneous) graph's node types and relations, read by
//! `[flatten]` and `[infer]` in place of their `nodes` and `edges` keys. See `crate::typed` for
//! how types and relations are numbered.
//!
//! ```toml
//! [graph.node_types.user]
//! table = "s3://bucket/users"          # node_id, features (this type's width), label, split
//! [graph.node_types.merchant]
//! table = "s3://bucket/merchants"
//! [graph.relations.pays]
//! src = "user"
//! dst = "merchant"
//! table = "s3://bucket/pays"           # src (a user id), dst (a merchant id), weight
//! reverse = true                       # also rev_pays: merchant -> user, the same edges reversed
//! fanouts = [5, 5]                     # this relation's fanouts (and rev_pays'), nearest hop first
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::JobError;
use crate::typed::{MAX_NODE_TYPES, MAX_RELATIONS, valid_name};

/// The `[graph]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphConfig {
    pub node_types: BTreeMap<String, NodeTypeConfig>,
    #[serde(default)]
    pub relations: BTreeMap<String, RelationConfig>,
}

/// `[graph.node_types.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeTypeConfig {
    /// The type's node table, as `[flatten] nodes`.
    pub table: String,
}

/// `[graph.relations.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationConfig {
    /// The source nodes' type: `src` ids are ids of that type's table.
    pub src: String,
    /// The destination nodes' type.
    pub dst: String,
    /// The relation's edge table, as `[flatten] edges`.
    pub table: String,
    /// Also pass messages the other way, as the relation `rev_<name>`.
    #[serde(default)]
    pub reverse: bool,
    /// This relation's fanouts (and its reverse's), nearest hop first; default `[flatten]`'s.
    #[serde(default)]
    pub fanouts: Option<Vec<u32>>,
}

/// A relation of the resolved graph, reversed ones included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationInput {
    pub name: String,
    pub src: u8,
    pub dst: u8,
    pub fanouts: Option<Vec<u32>>,
}

/// One relation table and the relations it feeds: its rows as `forward` edges, and reversed
/// as `reverse` edges when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationTable {
    pub table: String,
    pub forward: u8,
    pub reverse: Option<u8>,
}

/// The `[graph]` table numbered: types and relations in name order (see `crate::typed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedGraph {
    /// (name, node table) per type.
    pub node_types: Vec<(String, String)>,
    pub relations: Vec<RelationInput>,
    pub tables: Vec<RelationTable>,
}

impl TypedGraph {
    pub fn node_type(&self, name: &str) -> Option<u8> {
        self.node_types.iter().position(|(n, _)| n == name).map(|i| i as u8)
    }
}

/// The graph a stage's section reads: its own `nodes` and `edges` tables, or the job's
/// `[graph]` with a `target_type` of its types (a typed graph, returned numbered; `None` for a
/// homogeneous one). Either, never both.
pub fn section_graph(
    section: &'static str,
    (nodes, edges): (&str, &str),
    target_type: Option<&str>,
    graph: Option<&GraphConfig>,
) -> Result<Option<TypedGraph>, JobError> {
    let bad = |problem: String| Err(JobError::invalid(section, problem));
    match (graph, target_type) {
        (None, None) if nodes.is_empty() || edges.is_empty() => {
            bad("names no nodes and edges tables (or, for a typed graph, a [graph] table and a target_type)".into())
        }
        (None, None) => Ok(None),
        (None, Some(_)) => bad("target_type names a node type of [graph], and the job has no [graph]".into()),
        (Some(_), _) if !nodes.is_empty() || !edges.is_empty() => {
            let set = match (nodes.is_empty(), edges.is_empty()) {
                (false, false) => "nodes and edges",
                (false, true) => "nodes",
                _ => "edges",
            };
            bad(format!("names {set}, and the job has a [graph]: a typed graph's tables are in [graph]"))
        }
        (Some(_), None) => {
            bad("a typed graph needs target_type: the node type whose nodes get records and scores".into())
        }
        (Some(graph), Some(target)) => {
            let resolved = graph.resolve()?;
            if resolved.node_type(target).is_none() {
                return bad(format!("target_type = {target:?} is not a node type of [graph]"));
            }
            Ok(Some(resolved))
        }
    }
}

impl GraphConfig {
    /// Numbers the types and relations, and checks every name: a relation between unknown
    /// types, a reversed name that clashes, too many of either.
    pub fn resolve(&self) -> Result<TypedGraph, JobError> {
        let bad = |problem: String| JobError::invalid("graph", problem);
        if self.node_types.is_empty() {
            return Err(bad("names no node_types".into()));
        }
        if self.node_types.len() > MAX_NODE_TYPES {
            return Err(bad(format!("{} node types, at most {MAX_NODE_TYPES}", self.node_types.len())));
        }
        for name in self.node_types.keys().chain(self.relations.keys()) {
            if !valid_name(name) {
                return Err(bad(format!("{name:?} is not a name: letters, digits and _, starting with a letter")));
            }
        }
        let node_types: Vec<(String, String)> =
            self.node_types.iter().map(|(name, t)| (name.clone(), t.table.clone())).collect();
        let type_of = |relation: &str, end: &str, name: &str| {
            node_types.iter().position(|(n, _)| n == name).map(|i| i as u8).ok_or_else(|| {
                bad(format!("relation {relation}: {end} = {name:?} is not a node type (node_types: {})", {
                    let names: Vec<&str> = node_types.iter().map(|(n, _)| n.as_str()).collect();
                    names.join(", ")
                }))
            })
        };
        let mut named: BTreeMap<String, (u8, u8, Option<Vec<u32>>)> = BTreeMap::new();
        for (name, r) in &self.relations {
            let (src, dst) = (type_of(name, "src", &r.src)?, type_of(name, "dst", &r.dst)?);
            if let Some(f) = &r.fanouts
                && f.contains(&0)
            {
                return Err(bad(format!("relation {name}: a fanout of 0 would cut the neighborhood")));
            }
            named.insert(name.clone(), (src, dst, r.fanouts.clone()));
            if r.reverse {
                let reversed = format!("rev_{name}");
                if self.relations.contains_key(&reversed) {
                    return Err(bad(format!("relation {name} has reverse = true, and {reversed} is named too")));
                }
                named.insert(reversed, (dst, src, r.fanouts.clone()));
            }
        }
        if named.len() > MAX_RELATIONS {
            return Err(bad(format!("{} relations (reversed ones included), at most {MAX_RELATIONS}", named.len())));
        }
        let index = |name: &str| named.keys().position(|n| n == name).map(|i| i as u8).expect("named above");
        let tables = self
            .relations
            .iter()
            .map(|(name, r)| RelationTable {
                table: r.table.clone(),
                forward: index(name),
                reverse: r.reverse.then(|| index(&format!("rev_{name}"))),
            })
            .collect();
        let relations =
            named.into_iter().map(|(name, (src, dst, fanouts))| RelationInput { name, src, dst, fanouts }).collect();
        Ok(TypedGraph { node_types, relations, tables })
    }

    /// Every table the graph reads: the node types' then the relations'.
    pub fn tables(&self) -> Vec<&str> {
        let nodes = self.node_types.values().map(|t| t.table.as_str());
        nodes.chain(self.relations.values().map(|r| r.table.as_str())).collect()
    }
}

/// A typed link job's target type: its link relation's source type (`target_type` may name
/// it, and nothing else). The relation is one of `[graph.relations]`, not a reversed one: its
/// table holds the supervision edges.
pub fn link_source_type(
    section: &'static str,
    graph: &TypedGraph,
    link_relation: Option<&str>,
    target_type: Option<&str>,
) -> Result<String, JobError> {
    let bad = |problem: String| Err(JobError::invalid(section, problem));
    let Some(name) = link_relation else {
        return bad("a link job on a typed graph needs link_relation: the relation whose edges it predicts".into());
    };
    let relation = graph.relations.iter().position(|r| r.name == name).map(|r| r as u8);
    let Some(r) = relation.filter(|&r| graph.tables.iter().any(|t| t.forward == r)) else {
        let names: Vec<&str> =
            graph.tables.iter().map(|t| graph.relations[usize::from(t.forward)].name.as_str()).collect();
        return bad(format!(
            "link_relation = {name:?} is not a relation of [graph] ({}; a reversed relation's edges are its \
             table's: predict the relation itself)",
            names.join(", ")
        ));
    };
    let source = graph.node_types[usize::from(graph.relations[usize::from(r)].src)].0.clone();
    match target_type {
        Some(target) if target != source => bad(format!(
            "target_type = {target:?}, and a link job's target type is its link relation's source type \
             ({name}: {source}); leave target_type out"
        )),
        _ => Ok(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TypedGraph, JobError> {
        toml::from_str::<GraphConfig>(text).map_err(|e| JobError::Syntax(e.to_string()))?.resolve()
    }

    const GRAPH: &str = "[node_types.user]\ntable = 'u'\n[node_types.merchant]\ntable = 'm'\n\
                         [relations.pays]\nsrc = 'user'\ndst = 'merchant'\ntable = 'p'\nreverse = true\n\
                         [relations.knows]\nsrc = 'user'\ndst = 'user'\ntable = 'k'\nfanouts = [3, 2]\n";

    #[test]
    fn types_and_relations_are_numbered_by_name() {
        let g = parse(GRAPH).unwrap();
        assert_eq!(g.node_types, vec![("merchant".into(), "m".into()), ("user".into(), "u".into())]);
        let names: Vec<&str> = g.relations.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["knows", "pays", "rev_pays"]);
        assert_eq!((g.relations[1].src, g.relations[1].dst), (1, 0));
        assert_eq!((g.relations[2].src, g.relations[2].dst), (0, 1), "the reverse swaps the types");
        assert_eq!(g.relations[0].fanouts, Some(vec![3, 2]));
        assert_eq!(
            g.tables,
            vec![
                RelationTable { table: "k".into(), forward: 0, reverse: None },
                RelationTable { table: "p".into(), forward: 1, reverse: Some(2) },
            ]
        );
    }

    #[test]
    fn unknown_types_and_clashing_names_are_errors() {
        let unknown = parse(&GRAPH.replace("dst = 'merchant'", "dst = 'shop'")).unwrap_err().to_string();
        assert!(unknown.contains("relation pays: dst = \"shop\" is not a node type"), "{unknown}");
        assert!(unknown.contains("merchant, user"), "{unknown}");
        let clash = parse(&format!("{GRAPH}[relations.rev_pays]\nsrc = 'merchant'\ndst = 'user'\ntable = 'x'\n"));
        assert!(clash.unwrap_err().to_string().contains("rev_pays is named too"));
        let bad_name = parse("[node_types.'a b']\ntable = 'x'\n").unwrap_err().to_string();
        assert!(bad_name.contains("\"a b\" is not a name"), "{bad_name}");
        assert!(parse("").unwrap_err().to_string().contains("node_types"));
        assert!(parse(&GRAPH.replace("[3, 2]", "[3, 0]")).unwrap_err().to_string().contains("fanout of 0"));
    }
}
