//! The stage's body: level 0 from the sampled graph (every in-edge, undirected), the
//! multilevel scheme (coarsen on the cluster, partition the coarsest level on one worker,
//! refine each level on the way back), the quality facts, and the output table.

use std::collections::HashMap;

use cluster::hash::owner_key;
use cluster::{exchange, sum};
use sampling::{NodeStore, SampleSpec};
use schemas::facts::{Bins, Histogram};
use schemas::job::TypedGraph;
use schemas::{PartitionConfig, Sampler};
use serde::{Deserialize, Serialize};
use stage::{Body, Details, Graph, Reads, Summary, Worker, WorkerStats, Written};
use tables::Error;
use tables::parts::PartsOf;

use crate::coarsen::{coarsen, project};
use crate::initial::initial;
use crate::level::{Entry, Level, owner};
use crate::output;
use crate::refine::{Balance, Refined, refine};

/// Rounds a level may add to `rounds` to bring every part within its cap.
const EXTRA_ROUNDS: usize = 64;

/// The body of `[partition]`.
pub struct Partitioner<'a> {
    pub config: &'a PartitionConfig,
    pub parts: usize,
    pub typed: Option<&'a (TypedGraph, u8)>,
}

/// One worker's facts: the edge weights its nodes hold (each undirected edge at both ends),
/// cut by the partition and by the hash; and the part sizes, the levels and the moves, the
/// same on every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CutStats {
    pub held: u64,
    pub cut: u64,
    pub hash_cut: u64,
    pub self_loops: u64,
    /// Every part's size.
    pub sizes: Vec<u64>,
    /// Nodes per level, the input's first.
    pub levels: Vec<u64>,
    /// Node weight moved by refinement, over all levels (the same on every worker).
    pub moved: u64,
}

/// The summary's lines.
#[derive(Debug, Clone, Default)]
pub struct Quality {
    pub parts: usize,
    pub cap: u64,
    /// Edges (message-passing rows of the edge tables) cut by the partition and by the hash
    /// owner, of all such edges.
    pub cut: u64,
    pub hash_cut: u64,
    pub edges: u64,
    pub sizes: Vec<u64>,
    pub levels: Vec<u64>,
    pub moved: u64,
}

impl Quality {
    /// The share of edges cut.
    pub fn cut_share(&self) -> f64 {
        self.cut as f64 / self.edges.max(1) as f64
    }

    pub fn hash_cut_share(&self) -> f64 {
        self.hash_cut as f64 / self.edges.max(1) as f64
    }

    /// The largest part against the mean.
    pub fn imbalance(&self) -> f64 {
        let total: u64 = self.sizes.iter().sum();
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        largest as f64 * self.parts as f64 / total.max(1) as f64
    }
}

impl Details for Quality {
    fn lines(&self, _: &Summary<Self>) -> Vec<(&'static str, String)> {
        let levels: Vec<String> = self.levels.iter().map(u64::to_string).collect();
        vec![
            ("parts", format!("{} (at most {} nodes each)", self.parts, self.cap)),
            (
                "edge cut",
                format!(
                    "{:.2}% of {} edges ({}); the hash owner cuts {:.2}%",
                    100.0 * self.cut_share(),
                    self.edges,
                    self.cut,
                    100.0 * self.hash_cut_share()
                ),
            ),
            ("balance", format!("largest part {:.4} x the mean", self.imbalance())),
            ("levels", format!("{} nodes", levels.join(" -> "))),
            ("refined", format!("{} node moves", self.moved)),
        ]
    }

    fn histograms(&self) -> Vec<Histogram> {
        let parts = (0..self.parts).map(|p| p.to_string()).collect();
        vec![Histogram::new("part", "nodes", Bins::Categories(parts), self.sizes.clone())]
    }
}

impl Reads for Partitioner<'_> {
    fn sampling(&self) -> SampleSpec {
        let relations = self.typed.map_or(0, |(g, _)| g.relations.len());
        SampleSpec {
            sampler: Sampler::All,
            seed: self.config.seed,
            limit: usize::MAX,
            // Every in-edge is kept: no node has more than its sample, so none is a hub.
            hub_threshold: 0,
            relation_limits: vec![usize::MAX; relations],
            source_slots: false,
        }
    }
}

impl Body for Partitioner<'_> {
    type Own = CutStats;
    type Details = Quality;

    fn run(&mut self, worker: &mut Worker, graph: Graph, output: &PartsOf) -> Result<Written<CutStats>, Error> {
        let mut nodes = graph.nodes;
        drop(nodes.take_features());
        let reversed: Vec<u8> =
            self.typed.map_or_else(Vec::new, |(g, _)| g.tables.iter().filter_map(|t| t.reverse).collect());
        let (level, self_loops) = level_zero(worker.timely, &nodes, &reversed);
        worker.clock.lap("adjacency");
        let total = sum(worker.timely, level.weights.iter().sum());
        let balance = Balance { parts: self.parts, cap: cap(total, self.parts, self.config.balance) };
        let (level, refined, levels) = self.multilevel(worker, level, balance, total)?;
        let (cut, hash_cut, held) = cuts(&level, &refined.labels, self.parts);
        // Slot order for the table: a slot's node is `level.ids[i]` at its sorted place.
        let own = refined.own(&level);
        let part_of: Vec<u32> =
            nodes.ids.iter().map(|&id| own[level.known_index(id).expect("every own node is in level 0")]).collect();
        drop(level);
        let written = self.write(worker, &nodes, output, &part_of)?;
        worker.clock.lap("write");
        let own = CutStats { held, cut, hash_cut, self_loops, sizes: refined.sizes, levels, moved: refined.moved };
        Ok(Written { own, ..written })
    }

    fn details(&self, all: &[WorkerStats<CutStats>]) -> Quality {
        let add = |f: fn(&CutStats) -> u64| all.iter().map(|s| f(&s.own)).sum::<u64>();
        let first = all.first().map(|s| s.own.clone()).unwrap_or_default();
        let self_loops = add(|s| s.self_loops);
        Quality {
            parts: self.parts,
            cap: cap(all.iter().map(|s| s.nodes).sum(), self.parts, self.config.balance),
            // Each undirected edge is held at both its ends.
            cut: add(|s| s.cut) / 2,
            hash_cut: add(|s| s.hash_cut) / 2,
            edges: add(|s| s.held) / 2 + self_loops,
            sizes: first.sizes,
            levels: first.levels,
            moved: first.moved,
        }
    }
}

/// The coarsening's target (levels go on while they have more nodes) and the most a cluster
/// may weigh. A cluster may weigh half the slack a part has over the mean, so that the coarsest
/// level can still be balanced, or enough that the coarsening can reach `coarse_nodes`; never
/// half a part. The target is at least 8 nodes a part, so that every part gets several.
pub fn coarsening(total: u64, balance: Balance, coarse_nodes: u64) -> (u64, u64) {
    let target = coarse_nodes.max(8 * balance.parts as u64);
    let slack = balance.cap.saturating_sub(total.div_ceil(balance.parts as u64));
    let limit = (slack / 2).max(total / target).min(balance.cap / 2).max(1);
    (target, limit)
}

/// The most nodes a part may hold: `balance` times the mean, and never below the mean
/// rounded up (which any partition must reach).
pub fn cap(total: u64, parts: usize, balance: f64) -> u64 {
    let mean = total as f64 / parts as f64;
    ((balance * mean).floor() as u64).max(total.div_ceil(parts as u64))
}

/// What `multilevel` returns: level 0, its refined parts (with the weight moved over every
/// level) and the nodes per level.
type Multilevel = (Level, Refined, Vec<u64>);

impl Partitioner<'_> {
    /// Coarsens until `coarse_nodes`, partitions the coarsest level on worker 0, and refines
    /// every level from the coarsest back to level 0.
    fn multilevel(&self, worker: &mut Worker, level: Level, balance: Balance, total: u64) -> Result<Multilevel, Error> {
        let c = self.config;
        let (target, limit) = coarsening(total, balance, c.coarse_nodes);
        let mut levels = vec![level];
        let mut clusters: Vec<Vec<i64>> = Vec::new();
        let mut counts = vec![total_nodes(worker, &levels[0])];
        while *counts.last().unwrap_or(&0) > target && levels.len() < 32 {
            let depth = levels.len();
            let coarsened = coarsen(worker.timely, &levels[depth - 1], limit, c.rounds, c.seed, depth);
            let n = total_nodes(worker, &coarsened.level);
            self.log(worker, format!("coarsened level {depth}: {n} nodes in {} rounds", coarsened.rounds));
            if n * 10 > counts[depth - 1] * 9 {
                break;
            }
            counts.push(n);
            levels.push(coarsened.level);
            clusters.push(coarsened.cluster_of);
        }
        worker.clock.lap("coarsen");
        let coarsest = levels.len() - 1;
        let initial = initial(worker.timely, &levels[coarsest], balance, c.seed);
        self.log(
            worker,
            format!("partitioned the coarsest level ({} nodes) into {} parts", counts[coarsest], balance.parts),
        );
        worker.clock.lap("initial partition");
        let rounds = (c.rounds, EXTRA_ROUNDS);
        let mut refined = refine(worker.timely, &levels[coarsest], &initial, balance, rounds, c.seed, coarsest);
        for depth in (0..coarsest).rev() {
            let own = project(worker.timely, &clusters[depth], &levels[depth + 1], refined.own(&levels[depth + 1]));
            levels.truncate(depth + 1);
            clusters.truncate(depth);
            let moved = refined.moved;
            refined = refine(worker.timely, &levels[depth], &own, balance, rounds, c.seed, depth);
            refined.moved += moved;
            self.log(worker, format!("refined level {depth}"));
        }
        worker.clock.lap("refine");
        let level = levels.pop().ok_or_else(|| Error::Internal("no level 0".into()))?;
        // Level 0's nodes weigh 1 and every part over the cap gives nodes to parts with room
        // until none is over, so this holds; if it did not, no table may say otherwise.
        if let Some(p) = (0..balance.parts).find(|&p| refined.sizes[p] > balance.cap) {
            return Err(Error::Internal(format!(
                "part {p} holds {} nodes, over its cap of {}: the refinement could not balance the parts",
                refined.sizes[p], balance.cap
            )));
        }
        Ok((level, refined, counts))
    }

    fn log(&self, worker: &Worker, line: String) {
        if worker.reporter {
            tracing::info!("partition: {line}");
        }
    }

    fn write(
        &self,
        worker: &mut Worker,
        nodes: &NodeStore,
        output: &PartsOf,
        part_of: &[u32],
    ) -> Result<Written<CutStats>, Error> {
        let c = self.config;
        let metadata = HashMap::from([
            ("graphpartition.parts".to_owned(), self.parts.to_string()),
            ("graphpartition.balance".to_owned(), c.balance.to_string()),
            ("graphpartition.seed".to_owned(), c.seed.to_string()),
        ]);
        let names: Option<Vec<String>> = self.typed.map(|(g, _)| g.node_types.iter().map(|(n, _)| n.clone()).collect());
        let schema = output::schema(nodes, names.is_some(), metadata);
        let mut writer = output::writer(worker.io, output, schema, c.part_size_mb);
        let result = output::write(&mut writer, nodes, names.as_deref(), part_of).and_then(|rows| {
            writer.finish()?;
            Ok(rows)
        });
        let rows = sampling::agree(worker.timely, result)?;
        Ok(Written {
            targets: rows,
            bytes: writer.bytes_written,
            parts: writer.parts_written,
            entries: writer.parts.clone(),
            extra_entries: Vec::new(),
            carried: Vec::new(),
            own: CutStats::default(),
        })
    }
}

fn total_nodes(worker: &mut Worker, level: &Level) -> u64 {
    sum(worker.timely, level.len() as u64)
}

/// Level 0: every own node (weight 1) with each in-edge as an undirected edge of weight 1 at
/// both ends (the far end's entry goes to its owner), a reversed relation's edges skipped
/// (their table's edges are there already). Returns the level and the self-loops dropped.
fn level_zero(worker: &mut timely::worker::Worker, nodes: &NodeStore, reversed: &[u8]) -> (Level, u64) {
    let (me, peers) = (worker.index(), worker.peers());
    let mut local: Vec<Entry> = Vec::new();
    let mut far: Vec<Entry> = Vec::new();
    let mut self_loops = 0;
    for (slot, &id) in nodes.ids.iter().enumerate() {
        for e in nodes.sampled(slot) {
            if reversed.contains(&e.relation) {
                continue;
            }
            if e.src == id {
                self_loops += 1;
                continue;
            }
            local.push((id, e.src, 1));
            let entry = (e.src, id, 1);
            if owner(e.src, peers) == me { local.push(entry) } else { far.push(entry) }
        }
    }
    local.extend(exchange(worker, far, |e| owner_key(e.0)));
    let own = nodes.ids.iter().map(|&id| (id, 1)).collect();
    (Level::build(me, peers, own, local), self_loops)
}

/// The weight of own nodes' edges cut by the parts (`labels`, indexed as `level.known`) and by
/// the hash owner, and all held.
fn cuts(level: &Level, labels: &[u32], parts: usize) -> (u64, u64, u64) {
    let hash = |id: i64| owner_key(id) % parts as u64;
    let (mut cut, mut hash_cut, mut held) = (0, 0, 0);
    for i in 0..level.len() {
        for (v, w) in level.neighbors(i) {
            held += w;
            cut += if labels[v] != labels[i] { w } else { 0 };
            hash_cut += if hash(level.known[v]) != hash(level.ids[i]) { w } else { 0 };
        }
    }
    (cut, hash_cut, held)
}
