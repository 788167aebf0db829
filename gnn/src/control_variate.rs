//! VR-GCN's control-variate estimate of a layer's weighed sum over sampled in-edges (Chen, Zhu
//! and Song, ICML 2018): the estimator over a layer's edges on the device, and what a batch's
//! last layer reads for it ([`ControlVariate`]). The trainer keeps the histories on its
//! parameter server and refreshes them (`graphtrainer::histories`; `docs/control-variates.md`).
//!
//! A layer sums each node's in-neighbors' rows with weights `w_uv` ([`Weighing`]): GCN's
//! normalized adjacency `c_uv = 1 / sqrt((d_u + 1)(d_v + 1))` over the whole graph's
//! in-degrees, plus its own row weighing `1 / (d_v + 1)`; GraphSAGE's mean `1 / d_v`, its own
//! row taking a weight matrix of its own. With only a sample `S(v)` of `v`'s `n_v = d_v`
//! in-edges at hand, a history `h̄_u` of every node's row (its value some steps before), and
//! the histories' sum over the whole neighborhood `ā_v = sum over u in N(v) of w_uv h̄_u`, kept
//! current elsewhere, the estimate of the sum is
//!
//! `z_v = (n_v / |S(v)|) sum over u in S(v) of w_uv (h_u - h̄_u) + ā_v`
//!
//! (GCN adds `h_v / (d_v + 1)`). Only the difference `h - h̄` is sampled, so the estimate's
//! variance falls as the histories approach the rows. Its invariants, tested against a dense
//! computation below for both weighings:
//! - exact, for any sample, where the sampled sources' histories equal their rows (`ā` is then
//!   the exact sum);
//! - exact, whatever the histories, where every in-edge is sampled;
//! - unbiased: averaged over every sample of one size, it is the exact sum, whatever the
//!   histories.
//!
//! Both layers are linear in the sum before their bias, so the estimate of `(sum) W` is the
//! estimate of the sum times `W`.

use burn::prelude::*;
use burn::tensor::TensorData;

use crate::aggregate::EdgeTensors;
use crate::batch::Batch;
use crate::layers::{GcnLayer, SageLayer};

/// How a layer weighs its in-edges: `w_uv = source(d_u) target(d_v)`, in-degrees over the
/// whole graph. The split lets a history be kept already weighed by its source's half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighing {
    /// GCN: `c_uv = 1 / sqrt((d_u + 1)(d_v + 1))`, and the own row `1 / (d_v + 1)`.
    Gcn,
    /// GraphSAGE's mean aggregator: `1 / d_v` (a node without in-edges sums nothing).
    Mean,
}

impl Weighing {
    /// The source's factor of `w_uv`.
    pub fn source(self, degree: f32) -> f32 {
        match self {
            Weighing::Gcn => 1.0 / (degree + 1.0).sqrt(),
            Weighing::Mean => 1.0,
        }
    }

    /// The target's factor of `w_uv`.
    pub fn target(self, degree: f32) -> f32 {
        match self {
            Weighing::Gcn => 1.0 / (degree + 1.0).sqrt(),
            Weighing::Mean if degree > 0.0 => 1.0 / degree,
            Weighing::Mean => 0.0,
        }
    }

    /// Each sampled edge's weight, `w_uv scale(n_v / |S(v)|)`, for edges `src -> dst` (input
    /// and output rows; output row `r` is input row `r`) and every input row's in-degree.
    fn edges(self, (src, dst): (&[i64], &[i64]), degree: &[f32], scale: fn(f32) -> f32) -> Vec<f32> {
        let mut sampled = vec![0u32; degree.len()];
        dst.iter().for_each(|&v| sampled[v as usize] += 1);
        let weight = |u: i64, v: i64| {
            let (du, dv) = (degree[u as usize], degree[v as usize]);
            self.source(du) * self.target(dv) * scale(dv / sampled[v as usize] as f32)
        };
        src.iter().zip(dst).map(|(&u, &v)| weight(u, v)).collect()
    }
}

/// What the estimate reads besides the layer's input rows.
#[derive(Debug, Clone)]
pub struct Histories {
    /// `[rows_in, width]`: each input row's history `h̄`.
    pub rows: Tensor<2>,
    /// `[rows_out, width]`: each output row's `ā`, its histories' sum over every in-edge.
    pub aggregate: Tensor<2>,
}

/// Each sampled edge's weight in the estimate, `w_uv n_v / |S(v)|` (see
/// [`Weighing::edges`]).
pub fn edge_weights(src: &[i64], dst: &[i64], degree: &[f32], weighing: Weighing) -> Vec<f32> {
    weighing.edges((src, dst), degree, |ratio| ratio)
}

/// Each sampled edge's weight for the dropout noise (VR-GCN's CVD), `w_uv sqrt(n_v / |S(v)|)`:
/// the noise of distinct rows is independent, so this scale gives the sample's sum the variance
/// of the sum over every in-edge. Arguments as [`edge_weights`]'.
pub fn noise_weights(src: &[i64], dst: &[i64], degree: &[f32], weighing: Weighing) -> Vec<f32> {
    weighing.edges((src, dst), degree, f32::sqrt)
}

/// Each output row's own weight in GCN's sum, `1 / (d_v + 1)`, as a `[rows_out, 1]` column.
pub fn self_weights(degree: &[f32], rows_out: usize, device: &Device) -> Tensor<2> {
    let weights: Vec<f32> = degree[..rows_out].iter().map(|d| 1.0 / (d + 1.0)).collect();
    Tensor::from_data(TensorData::new(weights, [rows_out, 1]), device)
}

/// `z` of every output row of `e` (see the module doc): `h` is `[rows_in, width]`, `weights`
/// [`edge_weights`] as `[edges, 1]`, `own` GCN's [`self_weights`].
pub fn estimate(
    h: Tensor<2>,
    histories: &Histories,
    e: &EdgeTensors,
    weights: &Tensor<2>,
    own: Option<&Tensor<2>>,
) -> Tensor<2> {
    let sampled = e.sum(h.clone() - histories.rows.clone(), weights) + histories.aggregate.clone();
    match own {
        Some(own) => sampled + e.own_rows(h) * own.clone(),
        None => sampled,
    }
}

/// VR-GCN's CVD: [`estimate`] of the dropout-free rows `mean`, plus the dropout noise `h - mean`
/// summed over the sample with `noise` ([`noise_weights`]); GCN's own term reads `h`, the row
/// with dropout, as the sum over every in-edge does. `(weights, noise)` are `[edges, 1]`.
pub fn estimate_with_noise(
    (h, mean): (Tensor<2>, Tensor<2>),
    histories: &Histories,
    e: &EdgeTensors,
    (weights, noise): (&Tensor<2>, &Tensor<2>),
    own: Option<&Tensor<2>>,
) -> Tensor<2> {
    let dropped = e.sum(h.clone() - mean.clone(), noise);
    let sampled = e.sum(mean - histories.rows.clone(), weights) + histories.aggregate.clone() + dropped;
    match own {
        Some(own) => sampled + e.own_rows(h) * own.clone(),
        None => sampled,
    }
}

/// Histories as the trainer keeps them, one row per node: `g_u = h̄_u source(d_u)`, the history
/// already weighed by its source's factor ([`Weighing`]), so that a node's `ā` is a plain sum
/// of its in-neighbors' rows times its own factor.
///
/// A batch's rows come in the order [`HistoryRows::needed`] lists their nodes, which is the
/// order [`ControlVariate::of`] reads them in: no id is looked up. A node listed twice (a
/// sampled in-neighbor is an input row and in its root's list; two roots share a neighbor) is
/// read twice: a step reads a few thousand rows, and finding the repeats (a sort, or a hash
/// per id, and a map back from ids to rows) took longer than reading them again.
#[derive(Debug, Clone)]
pub struct HistoryRows {
    values: Vec<f32>,
    width: usize,
}

impl HistoryRows {
    /// The rows of the nodes [`HistoryRows::needed`] lists for a batch, `width` values each, in
    /// that order.
    pub fn new(values: Vec<f32>, width: usize) -> Self {
        HistoryRows { values, width }
    }

    /// The nodes whose rows a batch's estimate reads, in the order it reads them: its last
    /// layer's input rows, then each root's in-neighbors, root by root.
    pub fn needed(batch: &Batch) -> Vec<i64> {
        let (rows_in, rows_out) = batch.layers.last().map_or((0, 0), |e| (e.rows_in, e.rows_out));
        let lists = &batch.root_neighbors[..rows_out.min(batch.root_neighbors.len())];
        let mut ids = Vec::with_capacity(rows_in + lists.iter().map(Vec::len).sum::<usize>());
        ids.extend_from_slice(&batch.row_ids[..rows_in]);
        lists.iter().for_each(|n| ids.extend_from_slice(n));
        ids
    }

    /// Row `i` of the rows listed.
    fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.width..(i + 1) * self.width]
    }
}

/// What a batch's last layer reads, besides its input rows, to estimate its sum with control
/// variates: the histories of its input rows and the roots' `ā`, and the weights.
#[derive(Debug, Clone)]
pub struct ControlVariate {
    pub histories: Histories,
    /// [`edge_weights`] of the last layer's edges, `[edges, 1]`.
    pub weights: Tensor<2>,
    /// GCN's [`self_weights`] of its output rows, `[rows_out, 1]`; `None` for the mean.
    pub own: Option<Tensor<2>>,
    /// [`noise_weights`] of the last layer's edges, `[edges, 1]`.
    pub noise: Tensor<2>,
}

impl ControlVariate {
    /// The estimate's inputs for `batch` (records with `root_neighbors`; output row `v` of its
    /// last layer is root `v`), from the rows [`HistoryRows::needed`] names, kept for a layer
    /// that weighs as `weighing`.
    pub fn of(batch: &Batch, g: &HistoryRows, weighing: Weighing, device: &Device) -> Self {
        let e = batch.layers.last().expect("a batch has layers");
        let (rows_in, rows_out, width) = (e.rows_in, e.rows_out, g.width);
        let degree: Vec<f32> = batch.row_degrees[..rows_in].iter().map(|&d| d as f32).collect();
        let lists = &batch.root_neighbors[..rows_out.min(batch.root_neighbors.len())];
        let listed = rows_in + lists.iter().map(Vec::len).sum::<usize>();
        assert_eq!(g.values.len(), listed * width, "a history row for every node the batch lists");
        // h̄_u = g_u / source(d_u): the input rows' histories, listed first.
        let mut rows = Vec::with_capacity(rows_in * width);
        for (i, &d) in degree.iter().enumerate() {
            let scale = 1.0 / weighing.source(d);
            rows.extend(g.row(i).iter().map(|v| v * scale));
        }
        // ā_v = target(d_v) times the sum over u in N(v) of g_u: every in-edge of the root,
        // listed next, root by root.
        let mut aggregate = vec![0.0f32; rows_out * width];
        let mut next = rows_in;
        for (v, neighbors) in lists.iter().enumerate() {
            let sum = &mut aggregate[v * width..(v + 1) * width];
            for i in next..next + neighbors.len() {
                sum.iter_mut().zip(g.row(i)).for_each(|(s, x)| *s += x);
            }
            next += neighbors.len();
            let scale = weighing.target(degree[v]);
            sum.iter_mut().for_each(|s| *s *= scale);
        }
        let weights = edge_weights(&e.src, &e.dst, &degree, weighing);
        let noise = noise_weights(&e.src, &e.dst, &degree, weighing);
        let tensor = |values: Vec<f32>, rows: usize, cols: usize| {
            Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), device)
        };
        ControlVariate {
            histories: Histories { rows: tensor(rows, rows_in, width), aggregate: tensor(aggregate, rows_out, width) },
            weights: tensor(weights.clone(), weights.len(), 1),
            noise: tensor(noise.clone(), noise.len(), 1),
            own: (weighing == Weighing::Gcn).then(|| self_weights(&degree, rows_out, device)),
        }
    }

    /// The estimated sum over `h` (`[rows_in, width]`). With `mean` (the same rows without
    /// dropout: VR-GCN's CVD) the control variate is on the mean, and the dropout noise
    /// `h - mean` is summed over the sample with [`noise_weights`]: its expectation is zero,
    /// and scaled so, its variance is what the sum over every in-edge would have. Without,
    /// [`estimate`].
    fn sum(&self, h: Tensor<2>, mean: Option<Tensor<2>>, e: &EdgeTensors) -> Tensor<2> {
        let own = self.own.as_ref();
        match mean {
            None => estimate(h, &self.histories, e, &self.weights, own),
            Some(mean) => estimate_with_noise((h, mean), &self.histories, e, (&self.weights, &self.noise), own),
        }
    }

    /// GCN layer `layer` over `h` with its sum estimated ([`ControlVariate::sum`]), then the
    /// weight and the bias.
    pub fn gcn(&self, layer: &GcnLayer, h: Tensor<2>, mean: Option<Tensor<2>>, e: &EdgeTensors) -> Tensor<2> {
        self.sum(h, mean, e).matmul(layer.weight.val()) + layer.bias.val().unsqueeze::<2>()
    }

    /// GraphSAGE layer `layer` (no edge features) over `h` with its mean estimated: the output
    /// rows' own (with dropout) times the self weight, plus the estimate times the neighbor
    /// weight, plus the bias.
    pub fn sage(&self, layer: &SageLayer, h: Tensor<2>, mean: Option<Tensor<2>>, e: &EdgeTensors) -> Tensor<2> {
        assert!(layer.edge_weight.is_none(), "control variates estimate a GraphSAGE layer without edge features");
        let own = e.own_rows(h.clone()).matmul(layer.self_weight.val());
        own + self.sum(h, mean, e).matmul(layer.neighbor_weight.val()) + layer.bias.val().unsqueeze::<2>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::LayerEdges;
    use crate::kernel::Aggregation;
    use crate::rng::Stream;

    const WIDTH: usize = 3;
    const BOTH: [Weighing; 2] = [Weighing::Gcn, Weighing::Mean];

    /// A small graph: each node's in-neighbors, some with many, one with none.
    fn in_neighbors() -> Vec<Vec<i64>> {
        vec![vec![1, 2, 3, 4], vec![0, 2], vec![], vec![0, 1, 2, 4, 5], vec![3], vec![0, 3, 4]]
    }

    fn rows(seed: u64, n: usize) -> Vec<f64> {
        let mut s = Stream::new(&[seed]);
        (0..n * WIDTH).map(|_| f64::from(2.0 * s.unit() - 1.0)).collect()
    }

    /// The exact sum in f64, written out for each weighing: GCN's sum over in-neighbors of
    /// c_uv x_u plus x_v / (d_v + 1); the mean of the in-neighbors' rows (zeros without any).
    fn exact(x: &[f64], graph: &[Vec<i64>], weighing: Weighing) -> Vec<f64> {
        let d: Vec<f64> = graph.iter().map(|n| n.len() as f64).collect();
        let mut out = vec![0.0; x.len()];
        for (v, sources) in graph.iter().enumerate() {
            for k in 0..WIDTH {
                let row = |u: i64| x[u as usize * WIDTH + k];
                out[v * WIDTH + k] = match weighing {
                    Weighing::Gcn => {
                        x[v * WIDTH + k] / (d[v] + 1.0)
                            + sources
                                .iter()
                                .map(|&u| row(u) / ((d[u as usize] + 1.0) * (d[v] + 1.0)).sqrt())
                                .sum::<f64>()
                    }
                    Weighing::Mean if sources.is_empty() => 0.0,
                    Weighing::Mean => sources.iter().map(|&u| row(u)).sum::<f64>() / d[v],
                };
            }
        }
        out
    }

    /// The histories' full sums: `exact` less GCN's own term.
    fn aggregate(hbar: &[f64], graph: &[Vec<i64>], weighing: Weighing) -> Vec<f64> {
        let d: Vec<f64> = graph.iter().map(|n| n.len() as f64).collect();
        let mut out = exact(hbar, graph, weighing);
        for v in (0..graph.len()).filter(|_| weighing == Weighing::Gcn) {
            (0..WIDTH).for_each(|k| out[v * WIDTH + k] -= hbar[v * WIDTH + k] / (d[v] + 1.0));
        }
        out
    }

    /// The estimate over the in-edges `sample` keeps, in f64; with `mean` (the dropout-free
    /// rows), CVD's.
    fn estimated(
        (h, mean): (&[f64], Option<&[f64]>),
        hbar: &[f64],
        (graph, sample): (&[Vec<i64>], &[Vec<i64>]),
        weighing: Weighing,
    ) -> Vec<f64> {
        let device = Device::flex();
        let n = graph.len();
        let degree: Vec<f32> = graph.iter().map(|s| s.len() as f32).collect();
        let (src, dst): (Vec<i64>, Vec<i64>) =
            sample.iter().enumerate().flat_map(|(v, s)| s.iter().map(move |&u| (u, v as i64))).unzip();
        let (weights, noise) =
            (edge_weights(&src, &dst, &degree, weighing), noise_weights(&src, &dst, &degree, weighing));
        let e = EdgeTensors::new(&LayerEdges::new(n, n, src, dst, &degree), &device, Aggregation::Reference);
        let tensor = |x: &[f64], cols: usize| {
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let rows = x.len() / cols;
            Tensor::<2>::from_data(TensorData::new(x, [rows, cols]), &device)
        };
        let column = |w: Vec<f32>| tensor(&w.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1);
        let histories =
            Histories { rows: tensor(hbar, WIDTH), aggregate: tensor(&aggregate(hbar, graph, weighing), WIDTH) };
        let (weights, noise) = (column(weights), column(noise));
        let own = (weighing == Weighing::Gcn).then(|| self_weights(&degree, n, &device));
        let z = match mean {
            None => estimate(tensor(h, WIDTH), &histories, &e, &weights, own.as_ref()),
            Some(mean) => {
                let rows = (tensor(h, WIDTH), tensor(mean, WIDTH));
                estimate_with_noise(rows, &histories, &e, (&weights, &noise), own.as_ref())
            }
        };
        z.into_data().iter::<f32>().map(f64::from).collect()
    }

    fn close(a: &[f64], b: &[f64], what: &str) {
        let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-5, "{what}: off by {worst}");
    }

    /// Every `size`-subset of `items`.
    fn subsets(items: &[i64], size: usize) -> Vec<Vec<i64>> {
        if size == 0 {
            return vec![Vec::new()];
        }
        (0..items.len())
            .flat_map(|i| {
                subsets(&items[i + 1..], size - 1).into_iter().map(move |mut s| {
                    s.insert(0, items[i]);
                    s
                })
            })
            .collect()
    }

    #[test]
    fn histories_equal_to_the_rows_make_any_sample_exact() {
        let graph = in_neighbors();
        let h = rows(1, graph.len());
        for w in BOTH {
            let want = exact(&h, &graph, w);
            for size in 0..=2 {
                let first: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().copied().take(size).collect()).collect();
                let got = estimated((&h, None), &h, (&graph, &first), w);
                close(&got, &want, &format!("{w:?}, the first {size} in-edges"));
                let last: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().rev().copied().take(size).collect()).collect();
                let got = estimated((&h, None), &h, (&graph, &last), w);
                close(&got, &want, &format!("{w:?}, the last {size} in-edges"));
            }
        }
    }

    #[test]
    fn cvd_is_exact_with_every_in_edge_and_is_the_plain_estimate_without_dropout_noise() {
        let graph = in_neighbors();
        let (h, mean, hbar) = (rows(6, graph.len()), rows(7, graph.len()), rows(8, graph.len()));
        let first: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().copied().take(2).collect()).collect();
        for w in BOTH {
            let every = estimated((&h, Some(&mean)), &hbar, (&graph, &graph), w);
            close(&every, &exact(&h, &graph, w), &format!("{w:?}, every in-edge"));
            let plain = estimated((&h, None), &hbar, (&graph, &first), w);
            close(&estimated((&h, Some(&h)), &hbar, (&graph, &first), w), &plain, &format!("{w:?}, no noise"));
        }
        // The noise's weight: w_uv sqrt(n_v / |S|), node 3 keeping 2 of its 5 in-edges.
        let (src, dst, degree) = (vec![0, 1], vec![3, 3], vec![4.0, 2.0, 0.0, 5.0]);
        let gcn = |u: usize| (2.5f64).sqrt() / ((f64::from(degree[u]) + 1.0) * 6.0).sqrt();
        let got = noise_weights(&src, &dst, &degree, Weighing::Gcn);
        close(&got.iter().map(|&w| f64::from(w)).collect::<Vec<_>>(), &[gcn(0), gcn(1)], "GCN's noise weights");
        let mean = (2.5f64).sqrt() / 5.0;
        let got = noise_weights(&src, &dst, &degree, Weighing::Mean);
        close(&got.iter().map(|&w| f64::from(w)).collect::<Vec<_>>(), &[mean, mean], "the mean's noise weights");
    }

    #[test]
    fn every_in_edge_sampled_is_exact_whatever_the_histories() {
        let graph = in_neighbors();
        let (h, hbar) = (rows(2, graph.len()), rows(3, graph.len()));
        for w in BOTH {
            let got = estimated((&h, None), &hbar, (&graph, &graph), w);
            close(&got, &exact(&h, &graph, w), &format!("{w:?}, every in-edge"));
        }
    }

    #[test]
    fn averaged_over_every_sample_of_one_size_the_estimate_is_exact() {
        let graph = in_neighbors();
        let (h, hbar) = (rows(4, graph.len()), rows(5, graph.len()));
        // Node 3 has 5 in-neighbors: its 10 samples of 2, the other nodes keeping every in-edge.
        let samples = subsets(&graph[3], 2);
        assert_eq!(samples.len(), 10);
        let with = |s: &[i64]| {
            let mut sample = graph.clone();
            sample[3] = s.to_vec();
            sample
        };
        for w in BOTH {
            let want = exact(&h, &graph, w);
            let mut mean = vec![0.0; WIDTH];
            for s in &samples {
                let z = estimated((&h, None), &hbar, (&graph, &with(s)), w);
                mean.iter_mut().zip(&z[3 * WIDTH..4 * WIDTH]).for_each(|(m, z)| *m += z / samples.len() as f64);
            }
            close(&mean, &want[3 * WIDTH..4 * WIDTH], &format!("{w:?}, the mean over node 3's samples of 2"));
            // One sample alone is off: the histories differ from the rows.
            let one = estimated((&h, None), &hbar, (&graph, &with(&samples[0])), w);
            assert!((one[3 * WIDTH] - want[3 * WIDTH]).abs() > 1e-3, "{w:?}: a single sample is not the exact sum");
        }
    }
}
