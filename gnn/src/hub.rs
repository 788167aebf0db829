//! Split hubs of GAT and GINE, for full-graph training (graphtrainer's `full::hubs`): a hub's
//! in-edges are cut into *pieces*, each reduced on some worker that runs the layer's per-edge
//! part on them (`Gnn::piece_parts`; the layers' parts in `crate::pieces`); the hub's owner
//! merges its pieces' parts ([`HubTerms`]) into the layer's output for the hub, whose in-edges
//! are not among the owner's edges.
//!
//! - **GINE**'s neighbor sum `Σ_u ReLU(x_u + e_uw W_e + b_e)` is a sum over the in-edges: a
//!   piece's part is the sum over its edges, and the owner adds its pieces' parts to the hub's
//!   row before the MLP ([`Merged::Sum`]).
//! - **GAT**'s softmax over a hub's in-edges and its self-loop merges as GraphInfer's does
//!   (online softmax). A piece's logits read the hub's destination score `s_dst` per head
//!   (`Gnn::destination_scores`, sent by the owner); per head the piece returns its largest
//!   logit `m`, `S = Σ exp(l_e - m)` and `Z = Σ exp(l_e - m) keep_e z_u` (attention dropout
//!   `keep_e`, which leaves `S` alone, as the layer's normalizer). The owner shifts every part to
//!   one maximum and adds `S` to the hub's normalizer and `Z / normalizer` to its output
//!   ([`Merged::Softmax`]). The maximum is a shift that cancels in the ratio, so it is a
//!   constant on both sides.
//!
//! **Backward.** The parts are leaves at the owner: its backward gives their gradients, which
//! go back to the pieces' reducers; there `Gnn::piece_surrogate` (a scalar whose gradient is
//! that of `Σ part ⊙ gradient`) runs backward, which gives the gradients of the pieces' source
//! rows (a leaf) and of the layer's weights they read. GAT's parts also depend on `s_dst`, which
//! lives at the owner: the piece sends `∂S/∂s_dst` and `∂Z/∂s_dst` with its parts, and the owner
//! adds `(∂S/∂s_dst)(s_dst - s_dst')` to `S` (`s_dst'` its detached copy): zero in value, the
//! pieces' path to `s_dst` in gradient (exact: the parts are linear in nothing else the owner
//! holds). So the gradient is the full-batch one, the hub's sums grouped by pieces.

use std::ops::Range;

use burn::prelude::*;
use burn::tensor::{Int, TensorData};

/// The in-edges of the pieces one worker reduces, on a device: piece `p` holds the edges
/// `ranges[p]`, consecutive.
#[derive(Debug, Clone)]
pub struct PieceEdges {
    pub ranges: Vec<Range<usize>>,
    /// `[edges]`: each edge's source, a row of the rows the parts read (and on the host).
    pub src: Tensor<1, Int>,
    pub src_rows: Vec<usize>,
    /// `[edges]`: each edge's piece.
    pub piece: Tensor<1, Int>,
    /// `[edges, edge_dim]`, as the layer reads them; `None` when it reads none.
    pub features: Option<Tensor<2>>,
}

impl PieceEdges {
    /// `ranges` of edges whose sources are `src` (rows of the rows the parts read), with their
    /// `features` (`edge_dim` each; empty: none).
    pub fn new(ranges: Vec<Range<usize>>, src: Vec<i64>, features: Vec<f32>, edge_dim: usize, device: &Device) -> Self {
        let n = src.len();
        let piece: Vec<i64> = ranges.iter().enumerate().flat_map(|(p, r)| r.clone().map(move |_| p as i64)).collect();
        assert_eq!(piece.len(), n, "pieces hold every edge once");
        PieceEdges {
            ranges,
            src_rows: src.iter().map(|&s| s as usize).collect(),
            src: Tensor::from_data(TensorData::new(src, [n]), device),
            piece: Tensor::from_data(TensorData::new(piece, [n]), device),
            features: (edge_dim > 0).then(|| Tensor::from_data(TensorData::new(features, [n, edge_dim]), device)),
        }
    }

    pub fn pieces(&self) -> usize {
        self.ranges.len()
    }
}

/// GAT's inputs to its pieces, on the host: per piece its hub's destination scores
/// (`[pieces, heads]`), and the attention dropout per edge (`[edges, heads]`; `None`: none).
pub type PieceInputs<'a> = (Option<&'a [f32]>, Option<&'a [f32]>);

/// What a reducer computes for its pieces (one row each).
#[derive(Debug, Clone)]
#[expect(clippy::large_enum_variant, reason = "one a layer and pass")]
pub enum PieceParts {
    /// GINE: each piece's sum of its edges' messages, `[pieces, in]`.
    Sum(Tensor<2>),
    /// GAT, per piece and head (see the module doc).
    Softmax(SoftmaxParts),
}

/// A GAT piece's softmax parts.
#[derive(Debug, Clone)]
pub struct SoftmaxParts {
    /// `m`, `[pieces, heads]` row-major, on the host: a constant.
    pub max: Vec<f32>,
    /// `S` and its derivative in the hub's destination score, `[pieces, heads]`.
    pub total: Tensor<2>,
    pub d_total: Tensor<2>,
    /// `Z` and its derivative in the hub's destination score, `[pieces, heads * out]`.
    pub weighted: Tensor<2>,
    pub d_weighted: Tensor<2>,
}

/// The merged parts of a layer's split hubs at their owner, added to the layer's output rows
/// `rows` (`[hubs]`), which have no in-edges among the layer's edges.
#[derive(Debug, Clone)]
pub struct HubTerms {
    pub rows: Tensor<1, Int>,
    pub merged: Merged,
}

/// A hub's parts, merged over its pieces.
#[derive(Debug, Clone)]
#[expect(clippy::large_enum_variant, reason = "one a layer and pass")]
pub enum Merged {
    /// GINE: the hub's neighbor sum, `[hubs, in]`.
    Sum(Tensor<2>),
    /// GAT's.
    Softmax(MergedSoftmax),
}

/// GAT's pieces' [`SoftmaxParts`] shifted to the hub's largest `max` (`[hubs, heads]`, a
/// constant) and summed; `fill`, the hub's self-loop features (the mean of its in-edges'
/// features, `[hubs, edge_dim]`) when the layer reads edge features.
#[derive(Debug, Clone)]
pub struct MergedSoftmax {
    pub max: Tensor<2>,
    pub total: Tensor<2>,
    pub d_total: Tensor<2>,
    pub weighted: Tensor<2>,
    pub d_weighted: Tensor<2>,
    pub fill: Option<Tensor<2>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::EdgeTensors;
    use crate::batch::LayerEdges;
    use crate::kernel::Aggregation;
    use crate::layers::{GatLayer, GineLayer};
    use crate::model::{Gnn, Layer};
    use crate::params;
    use crate::rng::Stream;

    const N: usize = 9;
    const EDGE_DIM: usize = 2;

    fn random(s: &mut Stream, n: usize) -> Vec<f32> {
        (0..n).map(|_| 2.0 * s.unit() - 1.0).collect()
    }

    /// Node 0 has 7 in-edges (the hub, first), the others 0 to 3; random edge features.
    fn edges() -> (Vec<i64>, Vec<i64>, Vec<f32>) {
        let mut s = Stream::new(&[5]);
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for v in 0..N {
            let degree = if v == 0 { 7 } else { (s.next_u64() % 4) as usize };
            for _ in 0..degree {
                src.push((s.next_u64() % N as u64) as i64);
                dst.push(v as i64);
            }
        }
        let features = random(&mut s, src.len() * EDGE_DIM);
        (src, dst, features)
    }

    fn layer_edges(src: Vec<i64>, dst: Vec<i64>, features: Vec<f32>, device: &Device) -> EdgeTensors {
        let degree = vec![1.0; N];
        let mut e = LayerEdges::new(N, N, src, dst, &degree);
        (e.edge_dim, e.features) = (EDGE_DIM, features);
        EdgeTensors::new(&e, device, Aggregation::Auto)
    }

    /// The pieces' parts merged as the owner merges them, for the hub (row 0): GINE's sum;
    /// GAT's shifted to the largest maximum, with the hub's fill (the mean of its in-edges'
    /// features). The parts are leaves; GAT's scales per piece and head come with them.
    fn merge(parts: PieceParts, fill: Tensor<2>, device: &Device) -> (HubTerms, Vec<f32>) {
        let leaf = |t: Tensor<2>| Tensor::<2>::from_data(t.into_data(), device).require_grad();
        let rows = Tensor::from_data(TensorData::new(vec![0i64], [1]), device);
        let (merged, scales) = match parts {
            PieceParts::Sum(sums) => (Merged::Sum(leaf(sums.sum_dim(0))), Vec::new()),
            PieceParts::Softmax(p) => {
                let (heads, pieces) = (p.total.dims()[1], p.max.len() / p.total.dims()[1]);
                let mut max = vec![f32::MIN; heads];
                p.max.iter().enumerate().for_each(|(i, m)| max[i % heads] = max[i % heads].max(*m));
                let scales: Vec<f32> = (0..pieces * heads).map(|i| (p.max[i] - max[i % heads]).exp()).collect();
                let scale = Tensor::<2>::from_data(TensorData::new(scales.clone(), [pieces, heads]), device);
                let wide = p.weighted.dims()[1];
                let per_column = |t: Tensor<2>| {
                    let t = t.reshape([pieces, heads, wide / heads]) * scale.clone().reshape([pieces, heads, 1]);
                    t.reshape([pieces, wide])
                };
                let merged = MergedSoftmax {
                    max: Tensor::from_data(TensorData::new(max, [1, heads]), device),
                    total: leaf((p.total * scale.clone()).sum_dim(0)),
                    d_total: (p.d_total * scale.clone()).sum_dim(0),
                    weighted: leaf(per_column(p.weighted).sum_dim(0)),
                    d_weighted: per_column(p.d_weighted).sum_dim(0),
                    fill: Some(fill),
                };
                (Merged::Softmax(merged), scales)
            }
        };
        (HubTerms { rows, merged }, scales)
    }

    /// The pieces' parts' gradients (`pieces` of them) from the merged parts' (`grads`).
    fn piece_grads(terms: &HubTerms, scales: &[f32], pieces: usize, grads: &burn::tensor::Gradients) -> Vec<f32> {
        let of = |t: &Tensor<2>| t.grad(grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
        match &terms.merged {
            Merged::Sum(sums) => (0..pieces).flat_map(|_| of(sums)).collect(),
            Merged::Softmax(m) => {
                let (total, weighted) = (of(&m.total), of(&m.weighted));
                let (heads, out) = (total.len(), weighted.len() / total.len());
                let mut out_grads = Vec::new();
                for p in 0..pieces {
                    let scale = &scales[p * heads..(p + 1) * heads];
                    out_grads.extend((0..heads).map(|h| total[h] * scale[h]));
                    out_grads.extend(weighted.iter().enumerate().map(|(c, g)| g * scale[c / out]));
                }
                out_grads
            }
        }
    }

    /// One layer's case: the graph of `edges`, its input rows, GAT's attention-dropout keep
    /// mask (one per looped edge and head, drawn for the whole graph) and the gradient
    /// arriving at the layer's output.
    struct Case {
        model: Gnn,
        gat: bool,
        src: Vec<i64>,
        dst: Vec<i64>,
        features: Vec<f32>,
        hub_edges: usize,
        x: Vec<f32>,
        keep: Vec<f32>,
        upstream: Vec<f32>,
        device: Device,
    }

    /// A layer's output, its weights' gradient and its input rows' gradient.
    struct Pass {
        out: Vec<f32>,
        params: Vec<f32>,
        x: Vec<f32>,
    }

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    impl Case {
        fn x(&self) -> Tensor<2> {
            Tensor::<2>::from_data(TensorData::new(self.x.clone(), [N, 4]), &self.device).require_grad()
        }

        fn tensor(&self, v: &[f32], cols: usize) -> Tensor<2> {
            Tensor::<2>::from_data(TensorData::new(v.to_vec(), [v.len() / cols, cols]), &self.device)
        }

        fn keep_rows(&self, r: std::ops::Range<usize>) -> Vec<f32> {
            self.keep[r.start * 2..r.end * 2].to_vec()
        }

        fn forward(&self, x: Tensor<2>, e: &EdgeTensors, keep: Vec<f32>, hubs: Option<&HubTerms>) -> Tensor<2> {
            match &self.model.layers[0] {
                Layer::Gat(g) => g.forward(x, e, Some(self.tensor(&keep, 2)), hubs),
                Layer::Gine(g) => g.forward(x, e, hubs),
                _ => unreachable!(),
            }
        }

        /// The layer over the hub whole.
        fn whole(&self) -> Pass {
            let x = self.x();
            let edges = layer_edges(self.src.clone(), self.dst.clone(), self.features.clone(), &self.device);
            let out = self.forward(x.clone(), &edges, self.keep.clone(), None);
            let cols = out.dims()[1];
            let grads = (out.clone() * self.tensor(&self.upstream[..N * cols], cols)).sum().backward();
            Pass {
                params: params::gradients(&self.model, &grads),
                x: values(x.grad(&grads).unwrap()),
                out: values(out),
            }
        }

        /// The hub's in-edges in two pieces (4 and the rest) over the same rows, reduced as
        /// constants; the owner's layer, then the pieces' surrogate, run backward and their
        /// gradients added.
        fn split(&self) -> Pass {
            let (h, model, device) = (self.hub_edges, &self.model, &self.device);
            let rest = layer_edges(
                self.src[h..].to_vec(),
                self.dst[h..].to_vec(),
                self.features[h * EDGE_DIM..].to_vec(),
                device,
            );
            let pieces = PieceEdges::new(
                vec![0..4, 4..h],
                self.src[..h].to_vec(),
                self.features[..h * EDGE_DIM].to_vec(),
                EDGE_DIM,
                device,
            );
            let score = self.gat.then(|| values(model.destination_scores(0, self.x().detach().slice(0..1))).repeat(2));
            let piece_keep = self.gat.then(|| self.keep_rows(0..h));
            let inputs = (score.as_deref(), piece_keep.as_deref());
            let parts = model.piece_parts(0, self.x().detach(), &pieces, inputs);
            let fill: Vec<f32> = (0..EDGE_DIM)
                .map(|c| (0..h).map(|e| self.features[e * EDGE_DIM + c]).sum::<f32>() / h as f32)
                .collect();
            let (terms, scales) = merge(parts, self.tensor(&fill, EDGE_DIM), device);
            let (x, looped) = (self.x(), self.src.len() + N);
            let keep = [self.keep_rows(h..self.src.len()), self.keep_rows(self.src.len()..looped)].concat();
            let out = self.forward(x.clone(), &rest, keep, Some(&terms));
            let cols = out.dims()[1];
            let grads = (out.clone() * self.tensor(&self.upstream[..N * cols], cols)).sum().backward();
            let mut pass =
                Pass { params: params::gradients(model, &grads), x: values(x.grad(&grads).unwrap()), out: values(out) };
            let x_pieces = self.x();
            let piece_grads = piece_grads(&terms, &scales, 2, &grads);
            let grads = model.piece_surrogate(0, x_pieces.clone(), &pieces, inputs, &piece_grads).backward();
            pass.params.iter_mut().zip(params::gradients(model, &grads)).for_each(|(a, b)| *a += b);
            pass.x.iter_mut().zip(values(x_pieces.grad(&grads).unwrap())).for_each(|(a, b)| *a += b);
            pass
        }
    }

    #[test]
    fn a_hubs_pieces_merged_give_the_layer_and_its_gradient_of_the_hub_whole() {
        let device = Device::flex().autodiff();
        let (src, dst, features) = edges();
        let hub_edges = dst.iter().filter(|&&d| d == 0).count();
        let mut s = Stream::new(&[9]);
        let x = random(&mut s, N * 4);
        let gap = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        let layers = [
            Layer::Gine(GineLayer::new(4, 6, 3, EDGE_DIM, &[1], &device)),
            Layer::Gat(GatLayer::new(4, 3, 2, true, EDGE_DIM, &[2], &device)),
        ];
        for layer in layers {
            let model = Gnn { projections: Vec::new(), layers: vec![layer], decoder: None };
            let gat = matches!(model.layers[0], Layer::Gat(_));
            let looped = src.len() + N;
            let keep = random(&mut s, looped * 2).into_iter().map(|v| if v < -0.4 { 0.0 } else { 1.25 }).collect();
            let upstream = random(&mut s, N * 6);
            let (src, dst, features, x) = (src.clone(), dst.clone(), features.clone(), x.clone());
            let case = Case { model, gat, src, dst, features, hub_edges, x, keep, upstream, device: device.clone() };
            let (whole, split) = (case.whole(), case.split());
            assert!(gap(&whole.out, &split.out) < 1e-5, "gat {gat}: the outputs");
            assert!(whole.out.iter().any(|v| v.abs() > 1e-2) && whole.params.iter().any(|g| g.abs() > 1e-3));
            assert!(gap(&whole.params, &split.params) < 1e-5, "gat {gat}: the weights' gradient");
            assert!(gap(&whole.x, &split.x) < 1e-5, "gat {gat}: the rows' gradient");
        }
    }
}
