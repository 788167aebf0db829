//! A synthetic typed graph (`graphflat generate --hetero`), deterministic by seed: users,
//! items and shops, each with its own feature width, joined by four relations whose meaning
//! differs, so that a model that reads relations beats one that erases them.
//!
//! - `user` (the target type: label and split): features are noise; a user's class shows only
//!   through the items it buys.
//! - `item`: a category (`id % classes`) and features around that category's centroid.
//! - `shop`: features around a random category's centroid (of its own width).
//! - `buys` (user -> item) and `returns` (user -> item): each user buys items of its own class's
//!   category and returns as many items of the category half the classes away (with
//!   probability `homophily` each; else any item). With relations erased, a user's items are
//!   an even mix of categories `c` and `c + classes/2`, the same mix for both classes: only
//!   the relation tells them apart.
//! - `follows` (user -> user, Zipf destinations: user hubs) and `sells` (shop -> item): noise.
//!
//! With `--edge-feature-dim E`, `buys` edges carry `E` features (around a centroid of the
//! buyer's class) and `follows` edges `max(E / 2, 1)` (noise); `returns` and `sells` carry
//! none, so relations with and without edge features, of different widths, meet in one graph.
//! Features are drawn apart from the edges: the graph's structure does not depend on `E`.
//!
//! Item destinations are Zipf by rank within their category, so popular items are hubs. Edges
//! per relation: 30% buys, 30% returns, 20% follows, 20% sells of `nodes * avg_degree`; nodes:
//! 60% users, 30% items, 10% shops. The tables go to `<out>/nodes/<type>/` and
//! `<out>/edges/<relation>/`; with `erased`, the same graph with types and relations erased goes
//! to `<out>/erased/nodes/` and `<out>/erased/edges/` (see [`Rows::erased`], [`Ends::erased`]).

use std::ops::Range;

use arrow_array::RecordBatch;
use schemas::nodes::NodeRows;
use schemas::{GenerateConfig, Label, LabelKind, Split, edges};
use tables::commit::Stage;
use tables::{Io, Place};

use crate::error::Error;
use crate::generate::{Draws, Generated, parallel, split_of, zipf_rank};
use crate::table::TableWriter;

/// The node types, in the order of `Shape::counts` and `Shape::widths`.
pub const NODE_TYPES: [&str; 3] = ["user", "item", "shop"];
/// The relations: name, source type, destination type (indices into [`NODE_TYPES`]).
pub const RELATIONS: [(&str, usize, usize); 4] =
    [("buys", 0, 1), ("returns", 0, 1), ("follows", 0, 0), ("sells", 2, 1)];
/// Each relation's share of the edges, in tenths.
const EDGE_TENTHS: [u64; 4] = [3, 3, 2, 2];

const ROWS_PER_PART: u64 = 1 << 20;

/// The tables [`generate_hetero`] writes, relative to its output: `nodes/<type>` and
/// `edges/<relation>`, and with `erased` the erased view's `erased/nodes` and `erased/edges`.
pub fn table_dirs(erased: bool) -> Vec<String> {
    let nodes = NODE_TYPES.iter().map(|t| format!("nodes/{t}"));
    let mut dirs: Vec<String> = nodes.chain(RELATIONS.iter().map(|(r, _, _)| format!("edges/{r}"))).collect();
    if erased {
        dirs.extend(["erased/nodes".into(), "erased/edges".into()]);
    }
    dirs
}

/// The generator's sizes and fixed draws for one config.
struct Shape {
    config: GenerateConfig,
    counts: [u64; 3],
    widths: [usize; 3],
    /// Per type, `classes * width` centroid values (users' unused).
    centroids: [Vec<f64>; 3],
    /// Per class, `edge_width(0)` centroid values of `buys` edge features.
    edge_centroids: Vec<f64>,
}

impl Shape {
    fn new(config: &GenerateConfig) -> Self {
        let n = config.nodes;
        let counts = [n * 6 / 10, n * 3 / 10, n - n * 6 / 10 - n * 3 / 10];
        let d = config.feature_dim;
        let widths = [d, (d / 2).max(1), (d / 4).max(1)];
        let centroids = std::array::from_fn(|t| {
            let mut draws = Draws::new(config.seed, u64::MAX - 10 - t as u64);
            (0..config.classes * widths[t]).map(|_| draws.normal() * config.feature_signal).collect()
        });
        let mut draws = Draws::new(config.seed, u64::MAX - 20);
        let edge_centroids = (0..config.classes * config.edge_feature_dim)
            .map(|_| draws.normal() * config.edge_feature_signal)
            .collect();
        Shape { config: config.clone(), counts, widths, centroids, edge_centroids }
    }

    fn classes(&self) -> u64 {
        self.config.classes as u64
    }

    /// A user's class.
    fn label(&self, user: u64) -> u64 {
        cluster::hash::hash3(self.config.seed, user, 0x7573_6572) % self.classes()
    }

    /// A node's category: its class for a user, `id % classes` for an item, a draw for a shop.
    fn category(&self, node_type: usize, id: u64) -> u64 {
        match node_type {
            0 => self.label(id),
            1 => id % self.classes(),
            _ => cluster::hash::hash3(self.config.seed, id, 0x73686f70) % self.classes(),
        }
    }

    /// An item of `category`, Zipf by rank within it (popular items are hubs).
    fn item_of(&self, category: u64, draws: &mut Draws) -> u64 {
        let items = self.counts[1];
        let in_category = (items + self.classes() - 1 - category) / self.classes();
        if in_category == 0 {
            return draws.below(items);
        }
        zipf_rank(in_category, self.config.skew, draws) * self.classes() + category
    }

    /// Edge `e` of relation `r`: (src, dst).
    fn edge(&self, r: usize, e: u64, draws: &mut Draws) -> (u64, u64) {
        let [users, items, shops] = self.counts;
        let half = self.classes() / 2;
        let homophilous = draws.unit() < self.config.homophily;
        match r {
            // buys, returns: every user in turn, an item of its category or the opposite one.
            0 | 1 => {
                let user = e % users;
                let category = (self.label(user) + if r == 1 { half } else { 0 }) % self.classes();
                let item = if homophilous { self.item_of(category, draws) } else { draws.below(items) };
                (user, item)
            }
            2 => (draws.below(users), zipf_rank(users, self.config.skew, draws)),
            _ => (draws.below(shops), zipf_rank(items, self.config.skew, draws)),
        }
    }

    /// Node `v` of type `t` in the erased view: the types' ids one after another, users first.
    fn erased_id(&self, t: usize, v: i64) -> i64 {
        self.counts[..t].iter().sum::<u64>() as i64 + v
    }

    /// Relation `r`'s edge feature width: `buys` the configured one, `follows` half of it.
    fn edge_width(&self, r: usize) -> usize {
        match (r, self.config.edge_feature_dim) {
            (_, 0) => 0,
            (0, e) => e,
            (2, e) => (e / 2).max(1),
            _ => 0,
        }
    }

    /// Edge `src -> dst` of relation `r`'s features: around the buyer's class centroid for
    /// `buys`, noise for `follows`.
    fn edge_features(&self, r: usize, src: u64, draws: &mut Draws, out: &mut Vec<f32>) {
        let width = self.edge_width(r);
        let class = self.label(src) as usize;
        for k in 0..width {
            let centroid = if r == 0 { self.edge_centroids[class * width + k] } else { 0.0 };
            out.push((centroid + draws.normal()) as f32);
        }
    }

    fn edge_count(&self, r: usize) -> u64 {
        self.config.nodes * self.config.avg_degree * EDGE_TENTHS[r] / 10
    }
}

/// Writes the typed graph's tables, each with `_SUCCESS` (all written before any commits).
pub fn generate_hetero(io: &Io, config: &GenerateConfig) -> Result<Generated, Error> {
    check(config)?;
    let shape = Shape::new(config);
    let out = io.output(&config.output)?;
    let mut dirs: Vec<Place> = NODE_TYPES.iter().map(|t| out.child("nodes").child(t)).collect();
    dirs.extend(RELATIONS.iter().map(|(r, _, _)| out.child("edges").child(r)));
    if config.erased {
        dirs.extend([out.child("erased").child("nodes"), out.child("erased").child("edges")]);
    }
    // One run for every table: the graph is one whole (see TableWriter::start_together).
    let mut writers = TableWriter::start_together(io, &dirs, Stage::Generate, &[], config.overwrite)?.into_iter();
    let node_writers: Vec<TableWriter> = writers.by_ref().take(NODE_TYPES.len()).collect();
    let edge_writers: Vec<TableWriter> = writers.by_ref().take(RELATIONS.len()).collect();
    let erased = match (writers.next(), writers.next()) {
        (Some(nodes), Some(edges)) => Some((nodes, edges)),
        _ => None,
    };
    write_nodes(&shape, config, &node_writers, erased.as_ref().map(|(nodes, _)| nodes))?;
    let max_in_degree = write_edges(&shape, &edge_writers, erased.as_ref().map(|(_, edges)| edges))?;
    let erased_writers = erased.into_iter().flat_map(|(nodes, edges)| [nodes, edges]);
    TableWriter::commit_together(node_writers.into_iter().chain(edge_writers).chain(erased_writers).collect())?;
    let edges = (0..RELATIONS.len()).map(|r| shape.edge_count(r)).sum();
    Ok(Generated { nodes: config.nodes, edges, max_in_degree })
}

/// What a typed graph's generation cannot do: fewer than 10 nodes, multi-hot labels, an
/// erased view with edge features or featureless types, a featureless type it does not have.
fn check(config: &GenerateConfig) -> Result<(), Error> {
    config.check()?;
    if config.nodes < 10 || config.multi_label || (config.erased && config.edge_feature_dim > 0) {
        return Err(Error::Usage(
            "generate --hetero needs --nodes >= 10, no --multi-label, and no --erased view with edge features".into(),
        ));
    }
    if config.erased && !config.featureless.is_empty() {
        return Err(Error::Usage("generate --hetero: no --erased view of a graph with --featureless types".into()));
    }
    if let Some(unknown) = config.featureless.iter().find(|t| !NODE_TYPES.contains(&t.as_str())) {
        return Err(Error::Usage(format!(
            "generate --featureless {unknown}: the typed graph's node types are {}",
            NODE_TYPES.join(", ")
        )));
    }
    Ok(())
}

/// Every node type's table, part by part in parallel, and the erased view's node parts: type
/// t's part p is the erased table's part `first_part[t] + p`.
fn write_nodes(
    shape: &Shape,
    config: &GenerateConfig,
    writers: &[TableWriter],
    erased: Option<&TableWriter>,
) -> Result<(), Error> {
    let node_parts: Vec<u64> = shape.counts.iter().map(|c| c.div_ceil(ROWS_PER_PART)).collect();
    for (t, writer) in writers.iter().enumerate() {
        let first: u64 = node_parts[..t].iter().sum();
        parallel(node_parts[t], |part| {
            let lo = part * ROWS_PER_PART;
            let rows = node_rows(shape, t, lo..(lo + ROWS_PER_PART).min(shape.counts[t]));
            if let Some(nodes) = erased {
                let batch = rows.erased(shape, t).into_batch(true);
                nodes.write((first + part) as usize, batch.schema(), &[batch])?;
            }
            let mut batch = rows.into_batch(t == 0);
            if config.featureless.iter().any(|f| f == NODE_TYPES[t]) {
                batch.remove_column(batch.schema().index_of(schemas::nodes::FEATURES).expect("a features column"));
            }
            writer.write(part as usize, batch.schema(), &[batch])?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Every relation's table, part by part in parallel, and the erased view's edge parts (after
/// the relations before it); returns the largest in-degree of a hub.
fn write_edges(shape: &Shape, writers: &[TableWriter], erased: Option<&TableWriter>) -> Result<u64, Error> {
    let mut max_in_degree = 0;
    let edge_parts: Vec<u64> = (0..RELATIONS.len()).map(|r| shape.edge_count(r).div_ceil(ROWS_PER_PART)).collect();
    for (r, writer) in writers.iter().enumerate() {
        let (m, first) = (shape.edge_count(r), edge_parts[..r].iter().sum::<u64>());
        let hubs = parallel(edge_parts[r], |part| {
            let lo = part * ROWS_PER_PART;
            let (ends, hub) = edge_ends(shape, r, part, lo..(lo + ROWS_PER_PART).min(m));
            if let Some(edges) = erased {
                let batch = ends.erased(shape, r).into_batch();
                edges.write((first + part) as usize, batch.schema(), &[batch])?;
            }
            let batch = ends.into_batch();
            writer.write(part as usize, batch.schema(), &[batch])?;
            Ok(hub)
        })?;
        max_in_degree = max_in_degree.max(hubs.iter().sum());
    }
    Ok(max_in_degree)
}

/// One part of a node table's rows.
struct Rows {
    ids: Vec<i64>,
    features: Vec<f32>,
    width: usize,
    labels: Vec<Option<Label>>,
    splits: Vec<Option<Split>>,
}

impl Rows {
    fn into_batch(self, labeled: bool) -> RecordBatch {
        let (labels, splits): (&[Option<Label>], &[Option<Split>]) = (&self.labels, &self.splits);
        let (ids, features) = (self.ids, self.features);
        let rows = NodeRows { ids, features, dim: self.width, labels, label: LabelKind::Class, splits };
        if labeled { rows.to_batch() } else { rows.to_batch_unlabeled() }
    }

    /// The same rows of type `t` in the erased view: ids offset past the earlier types, features
    /// zero-padded to the widest type (the users'), no label off the target type.
    fn erased(&self, shape: &Shape, t: usize) -> Rows {
        let width = shape.widths[0];
        let mut features = Vec::with_capacity(self.ids.len() * width);
        for row in self.features.chunks(self.width) {
            features.extend_from_slice(row);
            features.resize(features.len() + width - self.width, 0.0);
        }
        let n = self.ids.len();
        Rows {
            ids: self.ids.iter().map(|&v| shape.erased_id(t, v)).collect(),
            features,
            width,
            labels: if t == 0 { self.labels.clone() } else { vec![None; n] },
            splits: if t == 0 { self.splits.clone() } else { vec![None; n] },
        }
    }
}

fn node_rows(shape: &Shape, t: usize, range: Range<u64>) -> Rows {
    let c = &shape.config;
    let width = shape.widths[t];
    let mut features = Vec::with_capacity((range.end - range.start) as usize * width);
    let (mut labels, mut splits) = (Vec::new(), Vec::new());
    for v in range.clone() {
        let mut draws = Draws::new(c.seed ^ (t as u64) << 56, v);
        if t == 0 {
            // Users: noise only; the class is in the items they buy.
            features.extend((0..width).map(|_| draws.normal() as f32));
            labels.push(Some(Label::Class(shape.label(v) as i64)));
            splits.push(Some(split_of(c, v)));
        } else {
            let k = shape.category(t, v) as usize;
            let centroid = &shape.centroids[t][k * width..(k + 1) * width];
            features.extend(centroid.iter().map(|&m| (m + draws.normal()) as f32));
        }
    }
    Rows { ids: range.map(|v| v as i64).collect(), features, width, labels, splits }
}

/// One part of an edge table's rows.
struct Ends {
    src: Vec<i64>,
    dst: Vec<i64>,
    weight: Vec<f32>,
    /// `dim` values per edge (none when `dim` is 0).
    features: Vec<f32>,
    dim: usize,
}

impl Ends {
    fn into_batch(self) -> RecordBatch {
        edges::to_batch_with(self.src, self.dst, self.weight, Some((self.features, self.dim)))
    }

    /// The same edges of relation `r` in the erased view: ids offset by type, and each edge in
    /// both directions (as `reverse = true` on every relation).
    fn erased(&self, shape: &Shape, r: usize) -> Ends {
        let (_, src_type, dst_type) = RELATIONS[r];
        let src: Vec<i64> = self.src.iter().map(|&v| shape.erased_id(src_type, v)).collect();
        let dst: Vec<i64> = self.dst.iter().map(|&v| shape.erased_id(dst_type, v)).collect();
        let weight = self.weight.repeat(2);
        Ends { src: [&src[..], &dst[..]].concat(), dst: [dst, src].concat(), weight, features: Vec::new(), dim: 0 }
    }
}

/// One part of relation `r`'s edges, and how many of them point at its rank-0 destination.
fn edge_ends(shape: &Shape, r: usize, part: u64, range: Range<u64>) -> (Ends, u64) {
    let mut draws = Draws::new(shape.config.seed, (r as u64 + 2) << 40 | part);
    let mut feature_draws = Draws::new(shape.config.seed, (r as u64 + 12) << 40 | part);
    let rows = (range.end - range.start) as usize;
    let dim = shape.edge_width(r);
    let mut ends = Ends {
        src: Vec::with_capacity(rows),
        dst: Vec::with_capacity(rows),
        weight: Vec::with_capacity(rows),
        features: Vec::with_capacity(rows * dim),
        dim,
    };
    let mut hub = 0;
    for e in range {
        let (s, d) = shape.edge(r, e, &mut draws);
        hub += u64::from(d == 0);
        ends.src.push(s as i64);
        ends.dst.push(d as i64);
        ends.weight.push((0.1 + 0.9 * draws.unit()) as f32);
        shape.edge_features(r, s, &mut feature_draws, &mut ends.features);
    }
    (ends, hub)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every edge's ends are nodes of its relation's types; buys go to the user's category and
    /// returns to the opposite one, at about the homophily rate.
    #[test]
    fn edges_join_their_types_and_carry_the_class_through_their_relation() {
        let config = GenerateConfig { nodes: 2000, homophily: 0.9, ..GenerateConfig::with_output("x") };
        let shape = Shape::new(&config);
        let half = shape.classes() / 2;
        for (r, &(_, src_type, dst_type)) in RELATIONS.iter().enumerate() {
            let mut draws = Draws::new(1, r as u64);
            let mut same = 0;
            for e in 0..1000 {
                let (s, d) = shape.edge(r, e, &mut draws);
                assert!(s < shape.counts[src_type] && d < shape.counts[dst_type], "relation {r}: {s} -> {d}");
                let wanted = (shape.label(s) + if r == 1 { half } else { 0 }) % shape.classes();
                same += u32::from(r < 2 && shape.category(1, d) == wanted);
            }
            if r < 2 {
                assert!(same > 850, "relation {r}: {same} of 1000 edges in the category");
            }
        }
        assert_eq!(shape.widths, [32, 16, 8], "each type its own width");
    }
}
