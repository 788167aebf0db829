//! Split hubs whose pieces run the layer: GAT (a softmax over the in-edges) and GINE (a ReLU
//! per edge) are not one linear sum of their input rows, so a hub's run is not a partial of
//! rows (`crate::full::hubs`) but a *piece* on which its reducer runs the layer's per-edge part
//! (`gnn::hub`, which argues the merge and its gradient). The hub has no in-edge at its owner:
//! the owner adds its pieces' parts to the hub's output ([`gnn::hub::HubTerms`]).
//!
//! A layer, every worker in step:
//! - **forward** ([`Hubs::layer_forward`]): GAT's owners send each piece its hub's destination
//!   score per head; each reducer runs its pieces over its input rows (after dropout) and sends
//!   each piece's parts to its hub's owner, which merges them per hub in piece order;
//! - **backward** ([`Hubs::layer_backward`]), after the owner's backward of the layer: each
//!   piece's parts' gradient goes back to its reducer, which takes the pieces' backward
//!   (`Gnn::piece_surrogate`) and adds the gradients of their source rows to its input rows'
//!   (its halo's then go to their owners) and those of the layer's weights to its gradient
//!   sums.
//!
//! A piece is a whole run (these layers are homogeneous). Its parts cross exactly, counted in
//! the exchange's bytes; what a piece sends is [`Hubs::part_width`] values, its gradient
//! [`Hubs::part_grad_width`].

use std::time::Instant;

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::Gnn;
use gnn::hub::{HubTerms, Merged, MergedSoftmax, PieceEdges, PieceParts};
use gnn::model::Layer;
use gnn::params;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::full::hubs::Hubs;

/// A piece's values between its hub's owner and its reducer: `at` a run of `to` (scores and
/// gradients) or a piece (virtual row) of `to` (parts).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Values {
    to: u32,
    at: u32,
    values: Vec<f32>,
}

/// What a layer's pieces leave for backward.
pub struct LayerHubs {
    /// The own hubs' merged parts (leaves in training), `None` without own hubs.
    pub terms: Option<HubTerms>,
    /// GAT: per own piece and head, `exp(m_piece - m_hub)`: a hub's part's gradient, scaled
    /// back to each piece's.
    scales: Vec<f32>,
    /// The reducer's source rows after dropout (`distinct` x width), their dropout mask, and
    /// GAT's scores and attention mask of its pieces.
    rows: Vec<f32>,
    mask: Option<Vec<f32>>,
    score_dst: Option<Vec<f32>>,
    keep: Option<Vec<f32>>,
    /// The layer and its input width.
    layer: usize,
    width: usize,
    /// Seconds the reducer spent on its pieces (the rest of the pass's time is the exchange's).
    pub seconds: f64,
}

impl LayerHubs {
    /// Values each piece's gradient is (see [`Hubs::part_grad_width`]).
    pub fn grad_values(&self, model: &Gnn) -> usize {
        Hubs::part_grad_width(model, self.layer, self.width)
    }
}

/// GAT layer `l`'s heads and width per head (`None`: GINE).
fn gat(model: &Gnn, l: usize) -> Option<(usize, usize)> {
    match &model.layers[l] {
        Layer::Gat(g) => Some((g.heads, g.out)),
        _ => None,
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 values")
}

fn tensor(values: Vec<f32>, cols: usize, device: &Device) -> Tensor<2> {
    let rows = values.len() / cols.max(1);
    Tensor::from_data(TensorData::new(values, [rows, cols]), device)
}

impl Hubs {
    /// Values a piece's parts are, at layer `l` of input width `width`: GINE's sum (`width`);
    /// GAT's maximum, `S`, `∂S/∂s_dst` per head and `Z`, `∂Z/∂s_dst` per head and column.
    pub fn part_width(model: &Gnn, l: usize, width: usize) -> usize {
        match gat(model, l) {
            Some((heads, out)) => 3 * heads + 2 * heads * out,
            None => width,
        }
    }

    /// Values a piece's gradient is: GINE's sum's, GAT's `S`'s and `Z`'s.
    pub fn part_grad_width(model: &Gnn, l: usize, width: usize) -> usize {
        match gat(model, l) {
            Some((heads, out)) => heads + heads * out,
            None => width,
        }
    }

    /// Each edge of the runs reduced here as GAT's attention dropout keys it: its hub and its
    /// place among the hub's in-edges, in run order.
    pub fn run_edge_keys(&self) -> impl Iterator<Item = (i64, u32)> + '_ {
        self.runs.iter().flat_map(|r| (0..r.edges.len() as u32).map(move |k| (r.hub, r.first + k)))
    }

    /// The pieces' edges on `device`.
    fn piece_edges(&self, device: &Device) -> PieceEdges {
        let ranges = self.runs.iter().map(|r| r.edges.clone()).collect();
        let src = self.distinct_at.iter().map(|&d| i64::from(d)).collect();
        PieceEdges::new(ranges, src, self.features.clone(), self.edge_dim, device)
    }

    /// The own rows of `x` (`width` each, after `mask`) the own hubs' scores read.
    fn hub_rows(&self, x: &[f32], width: usize, mask: Option<&[f32]>) -> Vec<f32> {
        let mut rows = Vec::with_capacity(self.hub_slots.len() * width);
        for &slot in &self.hub_slots {
            let at = slot as usize * width;
            rows.extend_from_slice(&x[at..at + width]);
            if let Some(mask) = mask {
                let n = rows.len();
                rows[n - width..].iter_mut().zip(&mask[at..at + width]).for_each(|(v, m)| *v *= m);
            }
        }
        rows
    }

    /// Layer `l`'s pieces over the input rows `x` (`[own | halo]`, `width` each) and their
    /// dropout `mask` (every input row's; `None`: none), GAT's attention dropout of the run
    /// edges `keep` (`[run edges, heads]`, in [`Hubs::run_edge_keys`]' order): the own hubs'
    /// terms for the layer, leaves when `track`. Every worker calls it in step.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_forward(
        &self,
        worker: &mut Worker,
        model: &Gnn,
        l: usize,
        (x, width, mask): (&[f32], usize, Option<&[f32]>),
        keep: Option<Vec<f32>>,
        track: bool,
        device: &Device,
    ) -> LayerHubs {
        let heads = gat(model, l).map(|(heads, _)| heads);
        // Phase 1 (GAT): each piece its hub's destination score.
        let score_dst = heads.map(|heads| self.send_scores(worker, model, l, (x, width, mask), heads, device));
        // Phase 2: the reducer's pieces over its source rows after dropout.
        let distinct_mask = mask.map(|m| self.mask_rows(m, width));
        let mut rows = Vec::with_capacity(self.distinct.len() * width);
        for (i, &row) in self.distinct.iter().enumerate() {
            rows.extend_from_slice(&x[row as usize * width..(row as usize + 1) * width]);
            if let Some(m) = &distinct_mask {
                let n = rows.len();
                rows[n - width..].iter_mut().zip(&m[i * width..(i + 1) * width]).for_each(|(v, m)| *v *= m);
            }
        }
        let mut out = Vec::with_capacity(self.runs.len());
        let lap = Instant::now();
        if !self.runs.is_empty() {
            let edges = self.piece_edges(device);
            let inputs = (score_dst.as_deref(), keep.as_deref());
            let parts = model.piece_parts(l, tensor(rows.clone(), width, device), &edges, inputs);
            let parts = part_rows(parts, self.runs.len());
            for (run, values) in self.runs.iter().zip(parts) {
                out.push(Values { to: run.owner, at: run.at, values });
            }
        }
        // Phase 3: the owner's parts, merged per hub.
        let mut received = cluster::exchange(worker, out, |v: &Values| u64::from(v.to));
        received.sort_unstable_by_key(|v| v.at);
        let seconds = lap.elapsed().as_secs_f64();
        let (terms, scales) = self.merge(model, l, received, track, device);
        LayerHubs { terms, scales, rows, mask: distinct_mask, score_dst, keep, layer: l, width, seconds }
    }

    /// Sends each piece its hub's destination scores (`heads` per piece); returns those of the
    /// pieces reduced here, in run order.
    fn send_scores(
        &self,
        worker: &mut Worker,
        model: &Gnn,
        l: usize,
        (x, width, mask): (&[f32], usize, Option<&[f32]>),
        heads: usize,
        device: &Device,
    ) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.reducers.len());
        if !self.hub_slots.is_empty() {
            let scores = values(model.destination_scores(l, tensor(self.hub_rows(x, width, mask), width, device)));
            for (h, &slot) in self.hub_slots.iter().enumerate() {
                for v in self.virtual_rows_of(slot as usize) {
                    let (to, run) = self.reducers[v as usize];
                    out.push(Values { to, at: run, values: scores[h * heads..(h + 1) * heads].to_vec() });
                }
            }
        }
        let mut received = cluster::exchange(worker, out, |v: &Values| u64::from(v.to));
        received.sort_unstable_by_key(|v| v.at);
        received.into_iter().flat_map(|v| v.values).collect()
    }

    /// The own hubs' terms from their pieces' parts (`received`, in piece order), and GAT's
    /// per-piece scales.
    fn merge(
        &self,
        model: &Gnn,
        l: usize,
        received: Vec<Values>,
        track: bool,
        device: &Device,
    ) -> (Option<HubTerms>, Vec<f32>) {
        if self.hub_slots.is_empty() {
            return (None, Vec::new());
        }
        let leaf = |values: Vec<f32>, cols: usize| {
            let t = tensor(values, cols, device);
            if track { t.require_grad() } else { t }
        };
        let slots: Vec<i64> = self.hub_slots.iter().map(|&s| i64::from(s)).collect();
        let rows = Tensor::from_data(TensorData::new(slots, [self.hub_slots.len()]), device);
        let pieces = |slot: u32| self.virtual_rows_of(slot as usize);
        let Some((heads, out)) = gat(model, l) else {
            // GINE: the hub's neighbor sum, its pieces' added in piece order.
            let width = received.first().map_or(0, |v| v.values.len());
            let mut sums = vec![0.0f32; self.hub_slots.len() * width];
            for (h, &slot) in self.hub_slots.iter().enumerate() {
                let sum = &mut sums[h * width..(h + 1) * width];
                for p in pieces(slot) {
                    sum.iter_mut().zip(&received[p as usize].values).for_each(|(s, v)| *s += v);
                }
            }
            return (Some(HubTerms { rows, merged: Merged::Sum(leaf(sums, width)) }), Vec::new());
        };
        let m = SoftmaxMerge::new(&self.hub_slots, pieces, &received, (heads, out));
        let fill = (self.edge_dim > 0).then(|| tensor(self.fills.clone(), self.edge_dim, device));
        let wide = heads * out;
        let merged = Merged::Softmax(MergedSoftmax {
            max: tensor(m.max, heads, device),
            total: leaf(m.total, heads),
            d_total: tensor(m.d_total, heads, device),
            weighted: leaf(m.weighted, wide),
            d_weighted: tensor(m.d_weighted, wide, device),
            fill,
        });
        (Some(HubTerms { rows, merged }), m.scales)
    }

    /// After the owner's backward of the layer `kept` is of (`grads`): each piece's parts' gradient to its
    /// reducer, which adds its source rows' gradient to `x_grads` (its input rows `[own |
    /// halo]`; `None` at an input that takes none) and the layer's weights' to `grad` (the
    /// flat gradient); returns the seconds it computed. Every worker calls it in step.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_backward(
        &self,
        worker: &mut Worker,
        model: &Gnn,
        kept: LayerHubs,
        grads: &burn::tensor::Gradients,
        (x_grads, grad): (Option<&mut [f32]>, &mut [f32]),
        device: &Device,
    ) -> f64 {
        let (l, width) = (kept.layer, kept.width);
        let out = self.part_grads(model, l, &kept, grads);
        let mut received = cluster::exchange(worker, out, |v: &Values| u64::from(v.to));
        if self.runs.is_empty() {
            return 0.0;
        }
        let lap = Instant::now();
        received.sort_unstable_by_key(|v| v.at);
        let edges = self.piece_edges(device);
        let inputs = (kept.score_dst.as_deref(), kept.keep.as_deref());
        let x = tensor(kept.rows, width, device).require_grad();
        let g: Vec<f32> = received.into_iter().flat_map(|v| v.values).collect();
        let piece_grads = model.piece_surrogate(l, x.clone(), &edges, inputs, &g).backward();
        grad.iter_mut().zip(params::gradients(model, &piece_grads)).for_each(|(g, p)| *g += p);
        let seconds = lap.elapsed().as_secs_f64();
        let Some(x_grads) = x_grads else { return seconds };
        let Some(mut share) = x.grad(&piece_grads).map(values) else { return seconds };
        // The rows were masked before the pieces read them: so is their gradient.
        if let Some(mask) = &kept.mask {
            share.iter_mut().zip(mask).for_each(|(s, m)| *s *= m);
        }
        for (&row, share) in self.distinct.iter().zip(share.chunks(width.max(1))) {
            let at = row as usize * width;
            x_grads[at..at + width].iter_mut().zip(share).for_each(|(x, s)| *x += s);
        }
        lap.elapsed().as_secs_f64()
    }

    /// Each own piece's parts' gradient, from its hub's (GAT's scaled back by the piece's
    /// shift), to its reducer.
    fn part_grads(&self, model: &Gnn, l: usize, kept: &LayerHubs, grads: &burn::tensor::Gradients) -> Vec<Values> {
        let Some(terms) = &kept.terms else { return Vec::new() };
        let grad_of = |t: &Tensor<2>| {
            let [rows, cols] = t.dims();
            (t.grad(grads).map_or_else(|| vec![0.0; rows * cols], values), cols)
        };
        // Per hub, its parts' gradient (GAT: `S`'s, then `Z`'s), and each piece's scale.
        let (hub_grads, cols, heads, out) = match (&terms.merged, gat(model, l)) {
            (Merged::Softmax(m), Some((heads, out))) => {
                let ((g_total, _), (g_weighted, _)) = (grad_of(&m.total), grad_of(&m.weighted));
                (join_columns(&g_total, &g_weighted, heads, heads * out), heads + heads * out, heads, out)
            }
            (merged, _) => {
                let Merged::Sum(sums) = merged else { unreachable!("GAT's terms are a softmax's") };
                let (g, cols) = grad_of(sums);
                (g, cols, 0, 0)
            }
        };
        let mut out_values = Vec::with_capacity(self.reducers.len());
        let mut piece = 0;
        for (h, &slot) in self.hub_slots.iter().enumerate() {
            for v in self.virtual_rows_of(slot as usize) {
                let (to, run) = self.reducers[v as usize];
                let mut values = hub_grads[h * cols..(h + 1) * cols].to_vec();
                if heads > 0 {
                    let scale = &kept.scales[piece * heads..(piece + 1) * heads];
                    values.iter_mut().enumerate().for_each(|(c, v)| {
                        *v *= scale[if c < heads { c } else { (c - heads) / out }];
                    });
                }
                out_values.push(Values { to, at: run, values });
                piece += 1;
            }
        }
        out_values
    }
}

/// Each piece's parts as the values it sends (see [`Hubs::part_width`]), `pieces` rows.
fn part_rows(parts: PieceParts, pieces: usize) -> Vec<Vec<f32>> {
    match parts {
        PieceParts::Sum(sums) => {
            let cols = sums.dims()[1];
            values(sums).chunks(cols.max(1)).map(<[f32]>::to_vec).collect()
        }
        PieceParts::Softmax(p) => {
            let (heads, wide) = (p.total.dims()[1], p.weighted.dims()[1]);
            let (total, d_total) = (values(p.total), values(p.d_total));
            let (weighted, d_weighted) = (values(p.weighted), values(p.d_weighted));
            (0..pieces)
                .map(|i| {
                    let (h, w) = (i * heads..(i + 1) * heads, i * wide..(i + 1) * wide);
                    [&p.max[h.clone()], &total[h.clone()], &d_total[h], &weighted[w.clone()], &d_weighted[w]].concat()
                })
                .collect()
        }
    }
}

/// GAT's pieces merged per hub: the hub's largest maximum per head, and each part's sum over
/// its pieces shifted to it (`exp(m_piece - m_hub)`, each piece's scale, kept for backward).
struct SoftmaxMerge {
    max: Vec<f32>,
    total: Vec<f32>,
    d_total: Vec<f32>,
    weighted: Vec<f32>,
    d_weighted: Vec<f32>,
    scales: Vec<f32>,
}

impl SoftmaxMerge {
    fn new(
        hubs: &[u32],
        pieces: impl Fn(u32) -> std::ops::Range<u32>,
        received: &[Values],
        (heads, out): (usize, usize),
    ) -> Self {
        let wide = heads * out;
        let mut m = SoftmaxMerge {
            max: Vec::with_capacity(hubs.len() * heads),
            total: vec![0.0; hubs.len() * heads],
            d_total: vec![0.0; hubs.len() * heads],
            weighted: vec![0.0; hubs.len() * wide],
            d_weighted: vec![0.0; hubs.len() * wide],
            scales: Vec::with_capacity(received.len() * heads),
        };
        for (h, &slot) in hubs.iter().enumerate() {
            let parts: Vec<&[f32]> = pieces(slot).map(|p| received[p as usize].values.as_slice()).collect();
            let max: Vec<f32> =
                (0..heads).map(|k| parts.iter().map(|v| v[k]).fold(f32::NEG_INFINITY, f32::max)).collect();
            for v in parts {
                let scale: Vec<f32> = (0..heads).map(|k| (v[k] - max[k]).exp()).collect();
                let (total, d_total) = (&v[heads..2 * heads], &v[2 * heads..3 * heads]);
                let (weighted, d_weighted) = (&v[3 * heads..3 * heads + wide], &v[3 * heads + wide..]);
                for k in 0..heads {
                    m.total[h * heads + k] += total[k] * scale[k];
                    m.d_total[h * heads + k] += d_total[k] * scale[k];
                }
                for c in 0..wide {
                    m.weighted[h * wide + c] += weighted[c] * scale[c / out];
                    m.d_weighted[h * wide + c] += d_weighted[c] * scale[c / out];
                }
                m.scales.extend(scale);
            }
            m.max.extend(max);
        }
        m
    }
}

/// Rows of `a` (`ca` wide) and `b` (`cb` wide) side by side.
fn join_columns(a: &[f32], b: &[f32], ca: usize, cb: usize) -> Vec<f32> {
    a.chunks(ca.max(1)).zip(b.chunks(cb.max(1))).flat_map(|(a, b)| a.iter().chain(b).copied()).collect()
}
