//! VR-GCN's control-variate estimate of a GCN layer's sum over sampled in-edges (Chen, Zhu and
//! Song, ICML 2018): the estimator over a layer's edges on the device, and what a batch's last
//! layer reads for it ([`ControlVariate`]). The trainer keeps the histories on its parameter
//! server and refreshes them (`graphtrainer::histories`; `docs/control-variates.md`).
//!
//! A GCN layer sums each node's in-neighbors' rows with the normalized adjacency's weights,
//! `c_uv = 1 / sqrt((d_u + 1)(d_v + 1))` over the whole graph's in-degrees, plus its own row
//! weighing `1 / (d_v + 1)`. With only a sample `S(v)` of `v`'s `n_v` in-edges at hand, a
//! history `h̄_u` of every node's row (its value some steps before), and the histories' sum
//! over the whole neighborhood `ā_v = sum over u in N(v) of c_uv h̄_u`, kept current elsewhere,
//! the estimate is
//!
//! `z_v = (n_v / |S(v)|) sum over u in S(v) of c_uv (h_u - h̄_u) + ā_v + h_v / (d_v + 1)`.
//!
//! Only the difference `h - h̄` is sampled, so the estimate's variance falls as the histories
//! approach the rows. Its invariants, tested against a dense computation below:
//! - exact, for any sample, where the sampled sources' histories equal their rows (`ā` is then
//!   the exact sum);
//! - exact, whatever the histories, where every in-edge is sampled;
//! - unbiased: averaged over every sample of one size, it is the exact sum, whatever the
//!   histories.
//!
//! A GCN layer is linear before its bias, so the estimate of `(Â h) W` is the estimate of
//! `Â h` times `W`: a caller may transform first, as `GcnLayer::propagate` does.

use burn::prelude::*;
use burn::tensor::TensorData;

use crate::aggregate::EdgeTensors;
use crate::batch::Batch;
use crate::layers::GcnLayer;

/// What the estimate reads besides the layer's input rows.
#[derive(Debug, Clone)]
pub struct Histories {
    /// `[rows_in, width]`: each input row's history `h̄`.
    pub rows: Tensor<2>,
    /// `[rows_out, width]`: each output row's `ā`, its histories' sum over every in-edge.
    pub aggregate: Tensor<2>,
}

/// Each sampled edge's weight in the estimate, `c_uv n_v / |S(v)|`, for edges `src -> dst`
/// (input and output rows; output row `r` is input row `r`) and every input row's in-degree
/// over the whole graph, `degree`.
pub fn edge_weights(src: &[i64], dst: &[i64], degree: &[f32]) -> Vec<f32> {
    let mut sampled = vec![0u32; degree.len()];
    dst.iter().for_each(|&v| sampled[v as usize] += 1);
    let norm = |row: i64| degree[row as usize] + 1.0;
    let scale = |v: i64| degree[v as usize] / sampled[v as usize] as f32;
    src.iter().zip(dst).map(|(&u, &v)| scale(v) / (norm(u) * norm(v)).sqrt()).collect()
}

/// VR-GCN's CVD: [`estimate`] of the dropout-free rows `mean`, plus the dropout noise `h - mean`
/// summed over the sample with `noise` ([`noise_weights`]); the output row's own term reads `h`,
/// its row with dropout, as the sum over every in-edge does. `(weights, noise)` are `[edges, 1]`.
pub fn estimate_with_noise(
    h: Tensor<2>,
    mean: Tensor<2>,
    histories: &Histories,
    e: &EdgeTensors,
    (weights, noise): (&Tensor<2>, &Tensor<2>),
    own: &Tensor<2>,
) -> Tensor<2> {
    let dropped = e.sum(h.clone() - mean.clone(), noise);
    let sampled = e.sum(mean - histories.rows.clone(), weights);
    sampled + dropped + histories.aggregate.clone() + e.own_rows(h) * own.clone()
}

/// Each sampled edge's weight for the dropout noise (VR-GCN's CVD), `c_uv sqrt(n_v / |S(v)|)`:
/// the noise of distinct rows is independent, so this scale gives the sample's sum the variance
/// of the sum over every in-edge. Arguments as [`edge_weights`]'.
pub fn noise_weights(src: &[i64], dst: &[i64], degree: &[f32]) -> Vec<f32> {
    let mut sampled = vec![0u32; degree.len()];
    dst.iter().for_each(|&v| sampled[v as usize] += 1);
    let norm = |row: i64| degree[row as usize] + 1.0;
    let scale = |v: i64| (degree[v as usize] / sampled[v as usize] as f32).sqrt();
    src.iter().zip(dst).map(|(&u, &v)| scale(v) / (norm(u) * norm(v)).sqrt()).collect()
}

/// Each output row's own weight, `1 / (d_v + 1)`, as a `[rows_out, 1]` column.
pub fn self_weights(degree: &[f32], rows_out: usize, device: &Device) -> Tensor<2> {
    let weights: Vec<f32> = degree[..rows_out].iter().map(|d| 1.0 / (d + 1.0)).collect();
    Tensor::from_data(TensorData::new(weights, [rows_out, 1]), device)
}

/// `z` of every output row of `e` (see the module doc): `h` is `[rows_in, width]`, `weights`
/// [`edge_weights`] as `[edges, 1]`, `own` [`self_weights`].
pub fn estimate(
    h: Tensor<2>,
    histories: &Histories,
    e: &EdgeTensors,
    weights: &Tensor<2>,
    own: &Tensor<2>,
) -> Tensor<2> {
    let sampled = e.sum(h.clone() - histories.rows.clone(), weights);
    sampled + histories.aggregate.clone() + e.own_rows(h) * own.clone()
}

/// Histories as the trainer keeps them, one row per node: `g_u = h̄_u / sqrt(d_u + 1)`, the
/// history already weighed by its source's half of `c_uv`, so that a node's `ā` is a plain sum
/// of its in-neighbors' rows over `sqrt(d_v + 1)`.
#[derive(Debug, Clone)]
pub struct HistoryRows {
    /// Ascending and distinct: a row is found by binary search (a step looks up thousands).
    ids: Vec<i64>,
    values: Vec<f32>,
    width: usize,
}

impl HistoryRows {
    /// The rows of `ids` (ascending and distinct, as [`HistoryRows::needed`] gives them),
    /// `width` values each in `ids` order.
    pub fn new(ids: Vec<i64>, values: Vec<f32>, width: usize) -> Self {
        assert_eq!(values.len(), ids.len() * width, "one history row per id");
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascending and distinct");
        HistoryRows { ids, values, width }
    }

    fn row(&self, id: i64) -> &[f32] {
        let i = self.ids.binary_search(&id).expect("a history row for every node the batch reads");
        &self.values[i * self.width..(i + 1) * self.width]
    }

    /// The nodes whose rows a batch's estimate reads: its last layer's input rows' and its
    /// roots' in-neighbors, distinct and ascending.
    pub fn needed(batch: &Batch) -> Vec<i64> {
        let rows_in = batch.layers.last().map_or(0, |e| e.rows_in);
        let mut ids: Vec<i64> = batch.row_ids[..rows_in].to_vec();
        batch.root_neighbors.iter().for_each(|n| ids.extend_from_slice(n));
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// What a batch's last GCN layer reads, besides its input rows, to estimate its sum with
/// control variates: the histories of its input rows and the roots' `ā`, and the weights.
#[derive(Debug, Clone)]
pub struct ControlVariate {
    pub histories: Histories,
    /// [`edge_weights`] of the last layer's edges, `[edges, 1]`.
    pub weights: Tensor<2>,
    /// [`self_weights`] of its output rows, `[rows_out, 1]`.
    pub own: Tensor<2>,
    /// [`noise_weights`] of the last layer's edges, `[edges, 1]`.
    pub noise: Tensor<2>,
}

impl ControlVariate {
    /// The estimate's inputs for `batch` (records with `root_neighbors`; output row `v` of its
    /// last layer is root `v`), from the rows [`HistoryRows::needed`] names.
    pub fn of(batch: &Batch, g: &HistoryRows, device: &Device) -> Self {
        let e = batch.layers.last().expect("a batch has layers");
        let (rows_in, rows_out, width) = (e.rows_in, e.rows_out, g.width);
        let degree: Vec<f32> = batch.row_degrees[..rows_in].iter().map(|&d| d as f32).collect();
        // h̄_u = g_u sqrt(d_u + 1): the input rows' histories.
        let mut rows = Vec::with_capacity(rows_in * width);
        for (&id, d) in batch.row_ids[..rows_in].iter().zip(&degree) {
            let scale = (d + 1.0).sqrt();
            rows.extend(g.row(id).iter().map(|v| v * scale));
        }
        // ā_v = sum over u in N(v) of g_u / sqrt(d_v + 1), every in-edge of the root.
        let mut aggregate = vec![0.0f32; rows_out * width];
        for (v, neighbors) in batch.root_neighbors.iter().enumerate().take(rows_out) {
            let sum = &mut aggregate[v * width..(v + 1) * width];
            neighbors.iter().for_each(|&u| sum.iter_mut().zip(g.row(u)).for_each(|(s, x)| *s += x));
            let scale = 1.0 / (degree[v] + 1.0).sqrt();
            sum.iter_mut().for_each(|s| *s *= scale);
        }
        let (weights, noise) = (edge_weights(&e.src, &e.dst, &degree), noise_weights(&e.src, &e.dst, &degree));
        let tensor = |values: Vec<f32>, rows: usize, cols: usize| {
            Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), device)
        };
        ControlVariate {
            histories: Histories { rows: tensor(rows, rows_in, width), aggregate: tensor(aggregate, rows_out, width) },
            weights: tensor(weights.clone(), weights.len(), 1),
            noise: tensor(noise.clone(), noise.len(), 1),
            own: self_weights(&degree, rows_out, device),
        }
    }

    /// GCN layer `layer` over `h` (`[rows_in, width]`) with its sum estimated, then the weight
    /// and the bias. With `mean` (the same rows without dropout: VR-GCN's CVD) the control
    /// variate is on the mean, and the dropout noise `h - mean` is summed over the sample with
    /// [`noise_weights`]: its expectation is zero, and scaled so, its variance is what the sum
    /// over every in-edge would have. Without, [`estimate`].
    pub fn last_layer(&self, layer: &GcnLayer, h: Tensor<2>, mean: Option<Tensor<2>>, e: &EdgeTensors) -> Tensor<2> {
        let z = match mean {
            None => estimate(h, &self.histories, e, &self.weights, &self.own),
            Some(mean) => estimate_with_noise(h, mean, &self.histories, e, (&self.weights, &self.noise), &self.own),
        };
        z.matmul(layer.weight.val()) + layer.bias.val().unsqueeze::<2>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::LayerEdges;
    use crate::kernel::Aggregation;
    use crate::rng::Stream;

    const WIDTH: usize = 3;

    /// A small graph: each node's in-neighbors, some with many, one with none.
    fn in_neighbors() -> Vec<Vec<i64>> {
        vec![vec![1, 2, 3, 4], vec![0, 2], vec![], vec![0, 1, 2, 4, 5], vec![3], vec![0, 3, 4]]
    }

    fn rows(seed: u64, n: usize) -> Vec<f64> {
        let mut s = Stream::new(&[seed]);
        (0..n * WIDTH).map(|_| f64::from(2.0 * s.unit() - 1.0)).collect()
    }

    /// The exact GCN sum in f64: sum over in-neighbors of c_uv x_u, plus x_v / (d_v + 1).
    fn exact(x: &[f64], graph: &[Vec<i64>]) -> Vec<f64> {
        let d: Vec<f64> = graph.iter().map(|n| n.len() as f64).collect();
        let mut out = vec![0.0; x.len()];
        for (v, sources) in graph.iter().enumerate() {
            for k in 0..WIDTH {
                out[v * WIDTH + k] = x[v * WIDTH + k] / (d[v] + 1.0)
                    + sources
                        .iter()
                        .map(|&u| x[u as usize * WIDTH + k] / ((d[u as usize] + 1.0) * (d[v] + 1.0)).sqrt())
                        .sum::<f64>();
            }
        }
        out
    }

    /// The histories' full sums: `exact` less each node's own term.
    fn aggregate(hbar: &[f64], graph: &[Vec<i64>]) -> Vec<f64> {
        let d: Vec<f64> = graph.iter().map(|n| n.len() as f64).collect();
        let mut out = exact(hbar, graph);
        for v in 0..graph.len() {
            (0..WIDTH).for_each(|k| out[v * WIDTH + k] -= hbar[v * WIDTH + k] / (d[v] + 1.0));
        }
        out
    }

    /// The estimate over the in-edges `sample` keeps, in f64.
    fn estimated(h: &[f64], hbar: &[f64], graph: &[Vec<i64>], sample: &[Vec<i64>]) -> Vec<f64> {
        let device = Device::flex();
        let n = graph.len();
        let degree: Vec<f32> = graph.iter().map(|s| s.len() as f32).collect();
        let (src, dst): (Vec<i64>, Vec<i64>) =
            sample.iter().enumerate().flat_map(|(v, s)| s.iter().map(move |&u| (u, v as i64))).unzip();
        let weights = edge_weights(&src, &dst, &degree);
        let e = EdgeTensors::new(&LayerEdges::new(n, n, src, dst, &degree), &device, Aggregation::Reference);
        let tensor = |x: &[f64], rows: usize| {
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            Tensor::<2>::from_data(TensorData::new(x, [rows, WIDTH]), &device)
        };
        let histories = Histories { rows: tensor(hbar, n), aggregate: tensor(&aggregate(hbar, graph), n) };
        let weights = Tensor::<2>::from_data(TensorData::new(weights.clone(), [weights.len(), 1]), &device);
        let z = estimate(tensor(h, n), &histories, &e, &weights, &self_weights(&degree, n, &device));
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
        let want = exact(&h, &graph);
        for size in 0..=2 {
            let sample: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().copied().take(size).collect()).collect();
            close(&estimated(&h, &h, &graph, &sample), &want, &format!("the first {size} in-edges"));
            let last: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().rev().copied().take(size).collect()).collect();
            close(&estimated(&h, &h, &graph, &last), &want, &format!("the last {size} in-edges"));
        }
    }

    /// [`estimated`] with CVD: `mean` the dropout-free rows.
    fn estimated_with_noise(
        h: &[f64],
        mean: &[f64],
        hbar: &[f64],
        graph: &[Vec<i64>],
        sample: &[Vec<i64>],
    ) -> Vec<f64> {
        let device = Device::flex();
        let n = graph.len();
        let degree: Vec<f32> = graph.iter().map(|s| s.len() as f32).collect();
        let (src, dst): (Vec<i64>, Vec<i64>) =
            sample.iter().enumerate().flat_map(|(v, s)| s.iter().map(move |&u| (u, v as i64))).unzip();
        let e = EdgeTensors::new(
            &LayerEdges::new(n, n, src.clone(), dst.clone(), &degree),
            &device,
            Aggregation::Reference,
        );
        let tensor = |x: &[f64], cols: usize| {
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let rows = x.len() / cols;
            Tensor::<2>::from_data(TensorData::new(x, [rows, cols]), &device)
        };
        let histories = Histories { rows: tensor(hbar, WIDTH), aggregate: tensor(&aggregate(hbar, graph), WIDTH) };
        let column = |w: Vec<f32>| tensor(&w.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1);
        let (weights, noise) = (column(edge_weights(&src, &dst, &degree)), column(noise_weights(&src, &dst, &degree)));
        let own = self_weights(&degree, n, &device);
        let z = estimate_with_noise(tensor(h, WIDTH), tensor(mean, WIDTH), &histories, &e, (&weights, &noise), &own);
        z.into_data().iter::<f32>().map(f64::from).collect()
    }

    #[test]
    fn cvd_is_exact_with_every_in_edge_and_is_the_plain_estimate_without_dropout_noise() {
        let graph = in_neighbors();
        let (h, mean, hbar) = (rows(6, graph.len()), rows(7, graph.len()), rows(8, graph.len()));
        close(&estimated_with_noise(&h, &mean, &hbar, &graph, &graph), &exact(&h, &graph), "every in-edge");
        let first: Vec<Vec<i64>> = graph.iter().map(|s| s.iter().copied().take(2).collect()).collect();
        close(&estimated_with_noise(&h, &h, &hbar, &graph, &first), &estimated(&h, &hbar, &graph, &first), "no noise");
        // The noise's weight: c_uv sqrt(n_v / |S|), node 3 keeping 2 of its 5 in-edges.
        let (src, dst, degree) = (vec![0, 1], vec![3, 3], vec![4.0, 2.0, 0.0, 5.0]);
        let want = |u: usize| (2.5f64).sqrt() / ((f64::from(degree[u]) + 1.0) * 6.0).sqrt();
        let got = noise_weights(&src, &dst, &degree);
        close(&got.iter().map(|&w| f64::from(w)).collect::<Vec<_>>(), &[want(0), want(1)], "noise weights");
    }

    #[test]
    fn every_in_edge_sampled_is_exact_whatever_the_histories() {
        let graph = in_neighbors();
        let (h, hbar) = (rows(2, graph.len()), rows(3, graph.len()));
        close(&estimated(&h, &hbar, &graph, &graph), &exact(&h, &graph), "every in-edge");
    }

    #[test]
    fn averaged_over_every_sample_of_one_size_the_estimate_is_exact() {
        let graph = in_neighbors();
        let (h, hbar) = (rows(4, graph.len()), rows(5, graph.len()));
        let want = exact(&h, &graph);
        // Node 3 has 5 in-neighbors: its 10 samples of 2, the other nodes keeping every in-edge.
        let samples = subsets(&graph[3], 2);
        let mut mean = vec![0.0; WIDTH];
        for s in &samples {
            let mut sample = graph.clone();
            sample[3] = s.clone();
            let z = estimated(&h, &hbar, &graph, &sample);
            // One sample alone is off: the histories differ from the rows.
            mean.iter_mut().zip(&z[3 * WIDTH..4 * WIDTH]).for_each(|(m, z)| *m += z / samples.len() as f64);
        }
        assert_eq!(samples.len(), 10);
        close(&mean, &want[3 * WIDTH..4 * WIDTH], "the mean over node 3's samples of 2");
        let one = estimated(&h, &hbar, &graph, &{
            let mut sample = graph.clone();
            sample[3] = samples[0].clone();
            sample
        });
        assert!((one[3 * WIDTH] - want[3 * WIDTH]).abs() > 1e-3, "a single sample is not the exact sum");
    }
}
