//! The typed models (R-GCN with and without bases, heterogeneous GraphSAGE) against a plain
//! full-graph implementation on a small random typed graph: every root's logits from typed
//! records (built by a plain BFS) equal the full graph's, with either aggregation, pruned or
//! not, with distinct input rows or not (ids repeat across types: the same id in two types is
//! two nodes). The kernel and the reference give the same loss and gradients with dropout.

use std::collections::BTreeMap;

use crate::common::typed::{MODELS, Node, TypedGraph, typed_graph, typed_records, typed_spec, types};
use crate::common::{DROPOUT, assert_same_step, step_spec};
use burn::module::Param;
use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::{BatchTensors, Gnn, Layer};
use schemas::layers::Layers;

fn host<const D: usize>(p: &Param<Tensor<D>>) -> Vec<f32> {
    p.val().into_data().try_to_vec::<f32>().unwrap()
}

/// `x W` for a row `x` and a row-major `[x.len(), cols]` matrix `w`.
fn times(x: &[f32], w: &[f32], cols: usize) -> Vec<f32> {
    (0..cols).map(|j| x.iter().enumerate().map(|(i, v)| v * w[i * cols + j]).sum()).collect()
}

fn add(a: &mut [f32], b: &[f32]) {
    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
}

/// A layer's own term of a node: `h_w W_0 + b`, or `h_w S_t + b_t`.
type OwnTerm = Box<dyn Fn(Node, &[f32]) -> Vec<f32>>;

/// Layer `l` of `model` on the whole graph, from each node's input row `h`: the module doc's
/// formulas, written out over plain vectors (R-GCN's basis combination included; a relation
/// with edge features adds the mean of its in-edges' `e W_e,r`).
fn full_layer(model: &Gnn, l: usize, g: &TypedGraph, h: &BTreeMap<Node, Vec<f32>>) -> BTreeMap<Node, Vec<f32>> {
    let edge_weights: Vec<Option<Vec<f32>>> = match &model.layers[l] {
        Layer::Rgcn(r) => r.edge_weights.iter().map(|w| w.as_ref().map(host)).collect(),
        Layer::HeteroSage(s) => s.edge_weights.iter().map(|w| w.as_ref().map(host)).collect(),
        _ => unreachable!("typed layers only"),
    };
    let (own, relation_weights, cols) = own_and_relation_weights(&model.layers[l]);
    let last = l + 1 == model.layers.len();
    h.iter()
        .map(|(&w, x)| {
            let mut out = own(w, x);
            for (rel, weight) in relation_weights.iter().enumerate() {
                let incoming: Vec<usize> =
                    (0..g.edges.len()).filter(|&e| g.edges[e].1 == w && usize::from(g.edges[e].2) == rel).collect();
                if incoming.is_empty() {
                    continue;
                }
                // Each message: h_u W_r, plus e_uw W_e,r where the relation has edge features.
                let n = incoming.len() as f32;
                for &e in &incoming {
                    let mut message = times(&h[&g.edges[e].0], weight, cols);
                    if let Some(we) = &edge_weights[rel] {
                        add(&mut message, &times(&g.edge_features[e], we, cols));
                    }
                    message.iter_mut().for_each(|m| *m /= n);
                    add(&mut out, &message);
                }
            }
            if !last {
                out.iter_mut().for_each(|v| *v = v.max(0.0));
            }
            (w, out)
        })
        .collect()
}

/// A typed layer's own term, each relation's weight (R-GCN's combined from its bases) and its
/// output width.
fn own_and_relation_weights(layer: &Layer) -> (OwnTerm, Vec<Vec<f32>>, usize) {
    match layer {
        Layer::Rgcn(r) => {
            let (w0, b) = (host(&r.self_weight), host(&r.bias));
            let cols = b.len();
            let weights = match &r.bases {
                None => r.relation_weights.iter().map(host).collect(),
                Some(bases) => combined(&host(&bases.bases), &host(&bases.coefficients), types().relations.len()),
            };
            let own = move |_: Node, x: &[f32]| {
                let mut out = times(x, &w0, cols);
                add(&mut out, &b);
                out
            };
            (Box::new(own), weights, cols)
        }
        Layer::HeteroSage(s) => {
            let selfs: Vec<Vec<f32>> = s.self_weights.iter().map(host).collect();
            let biases: Vec<Vec<f32>> = s.biases.iter().map(host).collect();
            let cols = s.output;
            let own = move |v: Node, x: &[f32]| {
                let mut out = times(x, &selfs[usize::from(v.0)], cols);
                add(&mut out, &biases[usize::from(v.0)]);
                out
            };
            (Box::new(own), s.neighbor_weights.iter().map(host).collect(), cols)
        }
        _ => unreachable!("typed layers only"),
    }
}

/// R-GCN's relation weights from its bases `v` and coefficients `a`: `W_r = sum over b of
/// a_rb V_b`.
fn combined(v: &[f32], a: &[f32], relations: usize) -> Vec<Vec<f32>> {
    let (count, size) = (a.len() / relations, v.len() / (a.len() / relations));
    (0..relations)
        .map(|rel| {
            let mut w = vec![0.0; size];
            for basis in 0..count {
                let coef = a[rel * count + basis];
                w.iter_mut().zip(&v[basis * size..]).for_each(|(x, y)| *x += coef * y);
            }
            w
        })
        .collect()
}

/// Every target node's logits on the whole graph.
fn full_graph(model: &Gnn, g: &TypedGraph) -> BTreeMap<Node, Vec<f32>> {
    let mut h: BTreeMap<Node, Vec<f32>> = g
        .features
        .iter()
        .map(|(&v, x)| {
            let p = &model.projections[usize::from(v.0)];
            let (w, b) = (host(&p.weight), host(&p.bias));
            let mut row = times(x, &w, b.len());
            add(&mut row, &b);
            (v, row)
        })
        .collect();
    for l in 0..model.layers.len() {
        h = full_layer(model, l, g, &h);
    }
    h
}

#[test]
fn typed_models_on_records_equal_the_full_graph() {
    let g = typed_graph();
    let recs = typed_records(&g);
    let device = Device::flex();
    for (kind, bases) in MODELS {
        let spec = typed_spec(kind, bases);
        let model = Gnn::new(&spec, &device);
        let full = full_graph(&model, &g);
        for (prune, aggregation, distinct_inputs) in [
            (true, Aggregation::Auto, false),
            (false, Aggregation::Auto, false),
            (true, Aggregation::Reference, false),
            (true, Aggregation::Auto, true),
            (false, Aggregation::Reference, true),
        ] {
            let plain = BatchSpec { prune, distinct_inputs, kernel_plans: true, ..BatchSpec::plain(Layers::every(2)) };
            let batch = Batch::build(&recs, &plain.reading(&spec));
            let logits = model.forward(&spec, &batch, &BatchTensors::new(&batch, &device, aggregation), None);
            let got = logits.into_data().try_to_vec::<f32>().unwrap();
            let what = format!("{kind:?} bases {bases}, prune {prune}, {aggregation:?}, distinct {distinct_inputs}");
            for (r, &root) in batch.roots.iter().enumerate() {
                for (c, want) in full[&(0, root)].iter().enumerate() {
                    let found = got[r * 3 + c];
                    assert!((found - want).abs() < 1e-4, "{what}: root {root} class {c}: {found} vs {want}");
                }
            }
        }
    }
}

#[test]
fn typed_steps_agree_across_kernel_reference_pruning_and_distinct_rows() {
    let g = typed_graph();
    let recs = typed_records(&g);
    let device = Device::flex().autodiff();
    for (kind, bases) in MODELS {
        let spec = typed_spec(kind, bases);
        let plain = BatchSpec::plain(Layers::every(2)).reading(&spec);
        let base = step_spec(&spec, &recs, &plain, DROPOUT, (&device, Aggregation::Reference));
        let what = format!("{kind:?} bases {bases}");
        let kernel = BatchSpec { kernel_plans: true, ..plain.clone() };
        let run = |batches: &BatchSpec| step_spec(&spec, &recs, batches, DROPOUT, (&device, Aggregation::Auto));
        assert_same_step(&format!("{what} kernel"), base.clone(), run(&kernel));
        assert_same_step(&format!("{what} unpruned"), base.clone(), run(&BatchSpec { prune: false, ..kernel.clone() }));
        assert_same_step(&format!("{what} distinct"), base, run(&BatchSpec { distinct_inputs: true, ..kernel }));
    }
}
