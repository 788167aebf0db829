//! Link models on a batch of link records: the loss equals one computed by hand from each
//! endpoint's embedding (its node record encoded alone) and the decoder's formula, with each
//! kind of batch negatives and their weights; the kernel and the reference aggregation agree.

use crate::common;
use std::collections::HashSet;

use crate::common::{graph, link_records, link_spec, link_step, records};
use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::{BatchTensors, Gnn};
use schemas::layers::Layers;
use schemas::model::{ModelKind, ModelSpec};
use schemas::record::LinkRecord;
use schemas::task::{BatchNegatives, Decoder};

/// The embedding of a node record encoded alone, in evaluation mode.
fn embed(model: &Gnn, spec: &ModelSpec, record: &schemas::Record, device: &Device) -> Vec<f32> {
    let batch = Batch::build(std::slice::from_ref(record), &BatchSpec::plain(Layers::every(2)));
    let tensors = BatchTensors::new(&batch, device, Aggregation::Reference);
    model.forward(spec, &batch, &tensors, None).into_data().iter::<f32>().collect()
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

/// The decoder's formula on two embeddings: `u . v`, or `w2 . relu(W1 (u * v) + b1) + b2`.
fn by_hand(model: &Gnn, u: &[f32], v: &[f32]) -> f32 {
    let x: Vec<f32> = u.iter().zip(v).map(|(a, b)| a * b).collect();
    let Some(m) = &model.decoder else { return x.iter().sum() };
    let (w1, b1, w2, b2) = (values(m.w1.val()), values(m.b1.val()), values(m.w2.val()), values(m.b2.val())[0]);
    let d = x.len();
    let hidden = (0..d).map(|j| (b1[j] + (0..d).map(|i| w1[i * d + j] * x[i]).sum::<f32>()).max(0.0));
    hidden.zip(&w2).map(|(h, w)| h * w).sum::<f32>() + b2
}

fn bce(x: f32, y: f32) -> f64 {
    let p = 1.0 / (1.0 + (-f64::from(x)).exp());
    -(f64::from(y) * p.ln() + (1.0 - f64::from(y)) * (1.0 - p).ln())
}

/// The link loss by its definition: positives weigh 1, negatives `P / N`, over `2 P`.
fn loss_by_hand(model: &Gnn, spec: &ModelSpec, links: &[LinkRecord], kind: BatchNegatives, device: &Device) -> f64 {
    let h = |r: &schemas::Record| embed(model, spec, r, device);
    let score = |a: &schemas::Record, b: &schemas::Record| by_hand(model, &h(a), &h(b));
    let (mut positives, mut negatives) = (Vec::new(), Vec::new());
    for l in links {
        positives.push(bce(score(&l.endpoints[0], &l.endpoints[1]), 1.0));
        negatives.extend(l.endpoints[2..].iter().map(|n| bce(score(&l.endpoints[0], n), 0.0)));
    }
    let edges: HashSet<(i64, i64)> = links.iter().map(|l| (l.src, l.dst)).collect();
    for (i, a) in links.iter().enumerate() {
        for (_, b) in links.iter().enumerate().filter(|(j, _)| *j != i) {
            // The other record's destination, or its negatives (ids and endpoints alike).
            let columns: Vec<(i64, &schemas::Record)> = match kind {
                BatchNegatives::None => Vec::new(),
                BatchNegatives::Destinations => vec![(b.dst, &b.endpoints[1])],
                BatchNegatives::Negatives => {
                    b.negatives.iter().copied().zip(b.endpoints[2..].iter().map(|e| &**e)).collect()
                }
            };
            for (_, end) in columns.into_iter().filter(|(id, _)| !edges.contains(&(a.src, *id))) {
                negatives.push(bce(score(&a.endpoints[0], end), 0.0));
            }
        }
    }
    let (p, n) = (positives.len() as f64, negatives.len() as f64);
    (positives.iter().sum::<f64>() + p / n * negatives.iter().sum::<f64>()) / (2.0 * p)
}

#[test]
fn the_link_loss_is_its_definition_from_each_endpoints_embedding() {
    let device = Device::flex().autodiff();
    let (n, dim) = (30, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    // Edge 0 twice: a positive of the batch is never an in-batch negative.
    let mut links = link_records(&recs, &edges, 12);
    links.push(links[0].clone());
    for kind in [ModelKind::Gcn, ModelKind::Gat] {
        for decoder in [Decoder::Dot, Decoder::Mlp] {
            let spec = link_spec(kind, dim, decoder);
            let model = Gnn::new(&spec, &device);
            for in_batch in [BatchNegatives::None, BatchNegatives::Destinations, BatchNegatives::Negatives] {
                let batch = gnn::link::LinkBatch::build(&links, &BatchSpec::plain(Layers::every(2)));
                let tensors = BatchTensors::new(&batch.batch, &device, Aggregation::Auto);
                let h = model.forward(&spec, &batch.batch, &tensors, None);
                let decoder_of = gnn::decoder::PairDecoder::of(&spec, model.decoder.as_ref());
                let (sum, count) = gnn::link::link_loss(decoder_of, h, &batch, in_batch);
                let loss = f64::from(values(sum)[0]) / count as f64;
                let expected = loss_by_hand(&model, &spec, &links, in_batch, &device);
                assert!(
                    (loss - expected).abs() < 1e-5,
                    "{kind:?} {decoder:?} batch negatives {in_batch:?}: {loss} vs {expected}"
                );
            }
        }
    }
}

#[test]
fn a_link_step_on_the_kernel_equals_the_reference() {
    let device = Device::flex().autodiff();
    let (n, dim) = (30, 4);
    let (edges, features) = graph(n, dim);
    let links = link_records(&records(n, 2, &edges, &features), &edges, 16);
    for kind in [ModelKind::Sage, ModelKind::Gat] {
        let spec = link_spec(kind, dim, Decoder::Mlp);
        let kernel = link_step(&spec, &links, BatchNegatives::Negatives, (&device, Aggregation::Auto));
        let reference = link_step(&spec, &links, BatchNegatives::Negatives, (&device, Aggregation::Reference));
        common::assert_same_step(&format!("{kind:?} link step"), kernel, reference);
    }
}
