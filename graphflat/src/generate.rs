//! Synthetic graphs of any size, deterministic by seed: Zipf in-degrees (real hubs), planted
//! communities as labels, edges that mostly stay inside a community, and features drawn around
//! a per-class centroid, so that a GNN beats an MLP on them. Edge features, when asked for, are
//! drawn the same way around a per-class centroid of the edge's destination: an in-edge tells
//! its destination's class even when the node features and the sources do not.

use arrow_array::RecordBatch;
use schemas::edges;
use schemas::nodes::NodeRows;
use schemas::{GenerateConfig, Label, LabelKind, Split};

use crate::error::Error;
use crate::table::TableWriter;
use cluster::hash::{hash3, mix64, unit_interval};
use tables::Io;
use tables::commit::Stage;

const NODES_PER_PART: u64 = 1 << 18;
const EDGES_PER_PART: u64 = 1 << 21;

/// What `generate` wrote.
#[derive(Debug, Clone)]
pub struct Generated {
    pub nodes: u64,
    pub edges: u64,
    pub max_in_degree: u64,
}

/// A deterministic stream of uniform numbers: draw `i` of stream `stream` is a pure function.
pub(crate) struct Draws {
    seed: u64,
    stream: u64,
    next: u64,
}

impl Draws {
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        Draws { seed, stream, next: 0 }
    }
    fn u64(&mut self) -> u64 {
        self.next += 1;
        hash3(self.seed, self.stream, self.next)
    }
    pub(crate) fn unit(&mut self) -> f64 {
        unit_interval(self.u64())
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.u64() as u128 * n as u128) >> 64) as u64
    }
    /// A standard normal draw (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The seed of the edge features' streams (stream = the edge's index): apart from every stream
/// of the node features, sources and destinations.
fn edge_feature_seed(seed: u64) -> u64 {
    mix64(seed ^ 0xed6e_f3a7_0000_0000)
}

/// The generator's fixed choices for one config.
struct Model {
    config: GenerateConfig,
    centroids: Vec<f64>,
    /// Per class, `edge_feature_dim` values: the centroid of its in-edges' features.
    edge_centroids: Vec<f64>,
    /// A multiplier coprime to n: rank r maps to node (r * mult) mod n, scattering hubs.
    mult: u64,
    /// Labels come from a second bijection: class `c` is the nodes whose shuffled id
    /// `v * shuffle mod n` lies in the c-th of `classes` equal ranges, so labels follow neither
    /// id order nor id parity; `unshuffle` is the inverse mod n.
    shuffle: u64,
    unshuffle: u64,
}

impl Model {
    fn new(config: &GenerateConfig) -> Self {
        let mut draws = Draws::new(config.seed, u64::MAX);
        let centroids =
            (0..config.classes * config.feature_dim).map(|_| draws.normal() * config.feature_signal).collect();
        let mut draws = Draws::new(config.seed, u64::MAX - 1);
        let edge_centroids = (0..config.classes * config.edge_feature_dim)
            .map(|_| draws.normal() * config.edge_feature_signal)
            .collect();
        let n = config.nodes;
        let coprime = |start: f64| {
            let mut m = (n as f64 * start) as u64 | 1;
            while gcd(m, n) != 1 {
                m += 2;
            }
            m % n
        };
        let shuffle = coprime(0.414_213_562_37);
        Model {
            config: config.clone(),
            centroids,
            edge_centroids,
            mult: coprime(0.618_033_988_75),
            shuffle,
            unshuffle: inverse_mod(shuffle, n),
        }
    }

    fn mul_mod(&self, a: u64, b: u64) -> u64 {
        ((a as u128 * b as u128) % self.config.nodes as u128) as u64
    }

    /// The first shuffled id of class `class` (class `classes` gives n).
    fn class_start(&self, class: u64) -> u64 {
        ((class as u128 * self.config.nodes as u128).div_ceil(self.config.classes as u128)) as u64
    }

    fn label(&self, node: u64) -> u64 {
        let shuffled = self.mul_mod(node, self.shuffle);
        (shuffled as u128 * self.config.classes as u128 / self.config.nodes as u128) as u64
    }

    /// An in-edge's destination: Zipf rank, scattered over the ids.
    fn destination(&self, draws: &mut Draws) -> u64 {
        let rank = zipf_rank(self.config.nodes, self.config.skew, draws);
        ((rank as u128 * self.mult as u128) % self.config.nodes as u128) as u64
    }

    /// An in-edge's source: from the destination's community with probability `homophily`.
    fn source(&self, dst: u64, draws: &mut Draws) -> u64 {
        let n = self.config.nodes;
        let src = if draws.unit() < self.config.homophily {
            let class = self.label(dst);
            let (lo, hi) = (self.class_start(class), self.class_start(class + 1));
            self.mul_mod(lo + draws.below(hi - lo), self.unshuffle)
        } else {
            draws.below(n)
        };
        if src != dst {
            return src;
        }
        // No self-loops: the next node of the same class (by shuffled id), if there is one.
        let class = self.label(dst);
        let (lo, hi) = (self.class_start(class), self.class_start(class + 1));
        let shuffled = self.mul_mod(dst, self.shuffle);
        let next = if hi - lo > 1 { lo + (shuffled - lo + 1) % (hi - lo) } else { (shuffled + 1) % n };
        self.mul_mod(next, self.unshuffle)
    }

    /// Appends edge number `edge`'s features to `out`: its destination class's edge
    /// centroid plus unit normal noise, a pure function of the seed and the edge's number.
    fn edge_features(&self, edge: u64, dst: u64, out: &mut Vec<f32>) {
        let dim = self.config.edge_feature_dim;
        let class = self.label(dst) as usize;
        let mut draws = Draws::new(edge_feature_seed(self.config.seed), edge);
        out.extend(self.edge_centroids[class * dim..(class + 1) * dim].iter().map(|&m| (m + draws.normal()) as f32));
    }
}

/// A Zipf-distributed rank in `0..n` (exponent `skew`, not 1), by inverse CDF: rank 0 is the
/// most likely.
pub(crate) fn zipf_rank(n: u64, skew: f64, draws: &mut Draws) -> u64 {
    let x = (((n as f64).powf(1.0 - skew) - 1.0) * draws.unit() + 1.0).powf(1.0 / (1.0 - skew));
    (x.floor() as u64).clamp(1, n) - 1
}

/// Node `v`'s split: train, valid or test by the config's fractions, from a hash of (seed, v).
pub(crate) fn split_of(c: &GenerateConfig, v: u64) -> Split {
    let u = unit_interval(mix64(c.seed ^ mix64(v.wrapping_add(0x5eed))));
    if u < c.train_fraction {
        Split::Train
    } else if u < c.train_fraction + c.valid_fraction {
        Split::Valid
    } else {
        Split::Test
    }
}

/// The inverse of `a` modulo `n` (they are coprime), by the extended Euclidean algorithm.
fn inverse_mod(a: u64, n: u64) -> u64 {
    if n == 1 {
        return 0;
    }
    let (mut r0, mut r1) = (i128::from(n), i128::from(a));
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    t0.rem_euclid(i128::from(n)) as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Writes `<output>/nodes/` and `<output>/edges/`, each with `_SUCCESS`.
pub fn generate(io: &Io, config: &GenerateConfig) -> Result<Generated, Error> {
    config.check()?;
    let model = Model::new(config);
    let out = io.output(&config.output)?;
    let n = config.nodes;
    let m = config.nodes * config.avg_degree;

    // Both tables are written before either commits: a failure leaves neither `_SUCCESS`.
    let dirs = [out.child("nodes"), out.child("edges")];
    let [nodes, edges]: [TableWriter; 2] =
        TableWriter::start_together(io, &dirs, Stage::Generate, &[], config.overwrite)?
            .try_into()
            .map_err(|_| Error::Internal("two tables started, not two writers".into()))?;
    parallel(n.div_ceil(NODES_PER_PART), |part| {
        let lo = part * NODES_PER_PART;
        let batch = node_batch(&model, lo..(lo + NODES_PER_PART).min(n));
        nodes.write(part as usize, batch.schema(), &[batch])
    })?;
    let degrees = parallel(m.div_ceil(EDGES_PER_PART), |part| {
        let lo = part * EDGES_PER_PART;
        let (batch, hub) = edge_batch(&model, part, lo..(lo + EDGES_PER_PART).min(m));
        edges.write(part as usize, batch.schema(), &[batch])?;
        Ok(hub)
    })?;
    TableWriter::commit_together(vec![nodes, edges])?;
    // The largest in-degree is that of rank 0, which every part counts.
    Ok(Generated { nodes: n, edges: m, max_in_degree: degrees.iter().sum() })
}

/// Runs `work` for parts 0..parts on all cores; results in part order.
pub(crate) fn parallel<T: Send>(parts: u64, work: impl Fn(u64) -> Result<T, Error> + Sync) -> Result<Vec<T>, Error> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()) as u64;
    let results: Vec<Vec<(u64, Result<T, Error>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let work = &work;
                scope.spawn(move || (t..parts).step_by(threads as usize).map(|p| (p, work(p))).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("generator thread panicked")).collect()
    });
    let mut flat: Vec<(u64, Result<T, Error>)> = results.into_iter().flatten().collect();
    flat.sort_by_key(|(p, _)| *p);
    flat.into_iter().map(|(_, r)| r).collect()
}

fn node_batch(model: &Model, range: std::ops::Range<u64>) -> RecordBatch {
    let c = &model.config;
    let dim = c.feature_dim;
    let mut features = Vec::with_capacity((range.end - range.start) as usize * dim);
    let mut labels = Vec::new();
    let mut splits = Vec::new();
    for v in range.clone() {
        let label = model.label(v);
        let mut draws = Draws::new(c.seed, v);
        let centroid = &model.centroids[label as usize * dim..(label as usize + 1) * dim];
        features.extend(centroid.iter().map(|&m| (m + draws.normal()) as f32));
        labels.push(Some(if c.multi_label {
            let next = (label as usize + 1) % c.classes;
            Label::Targets(
                (0..c.classes)
                    .map(|k| f32::from(k == label as usize || (label.is_multiple_of(2) && k == next)))
                    .collect(),
            )
        } else {
            Label::Class(label as i64)
        }));
        splits.push(Some(split_of(c, v)));
    }
    let label = if c.multi_label { LabelKind::Targets(c.classes) } else { LabelKind::Class };
    let ids = range.map(|v| v as i64).collect();
    NodeRows { ids, features, dim, labels: &labels, label, splits: &splits }.to_batch()
}

/// One part of the edges, and how many of its edges point at the largest hub (rank 0).
fn edge_batch(model: &Model, part: u64, range: std::ops::Range<u64>) -> (RecordBatch, u64) {
    let mut draws = Draws::new(model.config.seed, 1 << 40 | part);
    let rows = (range.end - range.start) as usize;
    let (mut src, mut dst, mut weight) = (Vec::with_capacity(rows), Vec::with_capacity(rows), Vec::with_capacity(rows));
    let dim = model.config.edge_feature_dim;
    let mut features = Vec::with_capacity(rows * dim);
    let mut hub = 0;
    for edge in range {
        let d = model.destination(&mut draws);
        hub += u64::from(d == 0);
        src.push(model.source(d, &mut draws) as i64);
        dst.push(d as i64);
        weight.push((0.1 + 0.9 * draws.unit()) as f32);
        if dim > 0 {
            model.edge_features(edge, d, &mut features);
        }
    }
    (edges::to_batch_with(src, dst, weight, Some((features, dim))), hub)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_bijection_inverts_and_sources_keep_their_class() {
        for n in [2u64, 7, 10, 1000, 1 << 20] {
            let config = GenerateConfig { nodes: n, classes: 2, ..GenerateConfig::with_output("x") };
            let model = Model::new(&config);
            for v in [0, 1, n / 2, n - 1] {
                assert_eq!(model.mul_mod(model.mul_mod(v, model.shuffle), model.unshuffle), v, "n {n}");
            }
        }
        let config = GenerateConfig { nodes: 1000, homophily: 1.0, ..GenerateConfig::with_output("x") };
        let model = Model::new(&config);
        let mut draws = Draws::new(1, 2);
        for dst in 0..1000 {
            let src = model.source(dst, &mut draws);
            assert_eq!(model.label(src), model.label(dst));
            assert_ne!(src, dst);
        }
    }

    /// An edge's features are a pure function of its number and tell its destination's class:
    /// the nearest edge centroid is the class's for nearly every edge.
    #[test]
    fn edge_features_tell_the_destination_class() {
        let config = GenerateConfig {
            nodes: 1000,
            edge_feature_dim: 8,
            edge_feature_signal: 2.0,
            ..GenerateConfig::with_output("x")
        };
        let model = Model::new(&config);
        let (dim, classes) = (config.edge_feature_dim, config.classes);
        let mut told = 0;
        for edge in 0..500u64 {
            let dst = edge * 7 % config.nodes;
            let (mut features, mut again) = (Vec::new(), Vec::new());
            model.edge_features(edge, dst, &mut features);
            model.edge_features(edge, dst, &mut again);
            assert_eq!(features, again);
            let distance = |c: usize| -> f64 {
                let centroid = &model.edge_centroids[c * dim..(c + 1) * dim];
                features.iter().zip(centroid).map(|(&f, &m)| (f64::from(f) - m).powi(2)).sum()
            };
            let nearest = (0..classes).min_by(|&a, &b| distance(a).total_cmp(&distance(b))).unwrap();
            told += usize::from(nearest as u64 == model.label(dst));
        }
        assert!(told > 450, "{told} of 500 edges tell their destination's class");
    }
}
