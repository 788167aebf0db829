//! Link records in a batch, and what a link model computes on them.
//!
//! Every endpoint of a link record (source, destination, each negative) is a node record, so a
//! batch of link records is the batch of their endpoints' records ([`Batch`], roots in record
//! order, endpoints in endpoint order) plus where each record's endpoints sit among the roots.
//! The encoder (the model's layers) computes one embedding per endpoint; the decoder
//! ([`crate::decoder`]) scores pairs of those rows:
//!
//! - each record's positive `(src, dst)` (label 1) and its negatives `(src, negative)` (label 0);
//! - with batch negatives ([`BatchNegatives`]), each positive's source against every other
//!   record's destination (`destinations`: in-batch negatives) or every other record's negatives
//!   (`negatives`: a pool of neighborhoods) in the batch (label 0), except pairs that are
//!   themselves positives of the batch.
//!
//! The loss is binary cross-entropy with logits over those pairs, positives and negatives
//! weighing the same in total ([`link_loss`]); it returns a sum and the count it is divided by,
//! so a worker pushes the gradient of the sum and the count, and the parameter server divides
//! by the step's total.

use schemas::mix::IdSet;

use burn::prelude::*;
use burn::tensor::{Int, TensorData};
use schemas::model::{ModelMeta, ModelSpec};
use schemas::record::LinkRecord;
use schemas::{BatchNegatives, Record, Split};

use crate::batch::{Batch, BatchSpec};
use crate::decoder::PairDecoder;
use crate::kernel::Aggregation;
use crate::model::{BatchTensors, Dropout, Gnn};

/// A batch of link records (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkBatch {
    /// The endpoints' records: record `i`'s source is root row `first[i]`, its destination the
    /// next row, then its negatives.
    pub batch: Batch,
    pub first: Vec<usize>,
    /// Negatives of each record.
    pub negatives: Vec<usize>,
    pub splits: Vec<Option<Split>>,
    /// `(src, dst)` of each record.
    pub edges: Vec<(i64, i64)>,
    /// Every record's negative ids, record by record (`negatives[i]` of them for record `i`).
    pub negative_ids: Vec<i64>,
}

/// Pairs of embedding rows to score, with their labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pairs {
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    pub labels: Vec<f32>,
}

impl Pairs {
    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

impl LinkBatch {
    pub fn build(links: &[LinkRecord], spec: &BatchSpec) -> LinkBatch {
        let endpoints: Vec<&Record> = links.iter().flat_map(|l| l.endpoints.iter().map(|e| &**e)).collect();
        let mut first = Vec::with_capacity(links.len());
        let mut at = 0;
        for l in links {
            assert_eq!(
                l.endpoints.len(),
                2 + l.negatives.len(),
                "link ({}, {}): one record per endpoint",
                l.src,
                l.dst
            );
            first.push(at);
            at += l.endpoints.len();
        }
        LinkBatch {
            batch: Batch::build(&endpoints, spec),
            first,
            negatives: links.iter().map(|l| l.negatives.len()).collect(),
            splits: links.iter().map(|l| l.split).collect(),
            edges: links.iter().map(|l| (l.src, l.dst)).collect(),
            negative_ids: links.iter().flat_map(|l| l.negatives.iter().copied()).collect(),
        }
    }

    /// Link records in the batch.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// The pairs of the records `keep` accepts, record by record: the positive, then each
    /// negative in draw order.
    pub fn pairs(&self, keep: impl Fn(usize) -> bool) -> Pairs {
        let mut pairs = Pairs::default();
        for i in (0..self.len()).filter(|&i| keep(i)) {
            let src = self.first[i] as i64;
            for (j, label) in std::iter::once((1, 1.0)).chain((0..self.negatives[i]).map(|j| (2 + j, 0.0))) {
                pairs.src.push(src);
                pairs.dst.push(src + j as i64);
                pairs.labels.push(label);
            }
        }
        pairs
    }

    /// The source row of every record's positive.
    fn source_rows(&self) -> Vec<i64> {
        self.first.iter().map(|&f| f as i64).collect()
    }

    /// The columns of a `kind` grid: for each, its row among the roots, its node id and the
    /// record it belongs to. `destinations`: each record's destination; `negatives`: each
    /// record's negatives in draw order.
    fn grid_columns(&self, kind: BatchNegatives) -> Vec<(i64, i64, usize)> {
        match kind {
            BatchNegatives::None => Vec::new(),
            BatchNegatives::Destinations => {
                self.edges.iter().enumerate().map(|(i, &(_, dst))| (self.first[i] as i64 + 1, dst, i)).collect()
            }
            BatchNegatives::Negatives => {
                let mut ids = self.negative_ids.iter();
                let per_record = self.negatives.iter().enumerate();
                per_record
                    .flat_map(|(i, &k)| (0..k).map(move |j| (i, self.first[i] as i64 + 2 + j as i64)))
                    .map(|(i, row)| (row, *ids.next().expect("one id per negative"), i))
                    .collect()
            }
        }
    }

    /// Row-major `[records, columns]` weights of the `kind` grid's pairs `(src_i, column_j)`:
    /// 1, except 0 where the column belongs to record `i` itself (its own destination, or its
    /// own negatives, scored already) or the pair is a positive of the batch (a true edge is no
    /// negative).
    fn grid_weights(&self, columns: &[(i64, i64, usize)]) -> Vec<f32> {
        // Probed once per grid cell (a quarter million a step at 512 records): the id hasher,
        // not SipHash (which took 5% of a learned-embedding epoch).
        let positives: IdSet<(i64, i64)> = self.edges.iter().copied().collect();
        let mut weights = Vec::with_capacity(self.len() * columns.len());
        for (i, &(src, _)) in self.edges.iter().enumerate() {
            for &(_, id, owner) in columns {
                weights.push(if owner == i || positives.contains(&(src, id)) { 0.0 } else { 1.0 });
            }
        }
        weights
    }
}

fn rows(values: Vec<i64>, device: &Device) -> Tensor<1, Int> {
    let n = values.len();
    Tensor::from_data(TensorData::new(values, [n]), device)
}

/// The scores of `pairs` from the embeddings `h` (`[endpoints, d]`), `[pairs]`.
pub fn score_pairs(decoder: PairDecoder, h: Tensor<2>, pairs: &Pairs) -> Tensor<1> {
    let device = h.device();
    let src = h.clone().select(0, rows(pairs.src.clone(), &device));
    decoder.score(src, h.select(0, rows(pairs.dst.clone(), &device)))
}

/// `sum of w * BCE(x, y)` in its stable form `max(x, 0) - x y + log(1 + e^-|x|)`.
fn bce_sum<const D: usize>(x: Tensor<D>, y: Tensor<D>, weights: Tensor<D>) -> Tensor<1> {
    let elementwise = x.clone().clamp_min(0.0) - x.clone() * y + (x.abs().neg().exp() + 1.0).log();
    (elementwise * weights).sum()
}

/// The binary cross-entropy with logits of `pairs`' scores from `h`, summed: a positive
/// weighs 1, a negative `negative_weight`.
pub fn pairs_loss(decoder: PairDecoder, h: Tensor<2>, pairs: &Pairs, negative_weight: f32) -> Tensor<1> {
    let device = h.device();
    let weights: Vec<f32> = pairs.labels.iter().map(|&y| if y > 0.0 { 1.0 } else { negative_weight }).collect();
    let logits = score_pairs(decoder, h, pairs);
    let vector = |v: Vec<f32>| Tensor::<1>::from_data(TensorData::new(v, [pairs.len()]), &device);
    bce_sum(logits, vector(pairs.labels.clone()), vector(weights))
}

/// A training step's loss on a batch, as a sum, and the count the parameter server divides
/// it by: binary cross-entropy with logits over every record's positive and negatives and the
/// `batch` negatives' grid (see the module doc). Positives and negatives weigh the same in
/// total: with `P` positives and `N` negatives in the batch, each negative weighs `P / N` and
/// the count is `2 P`, so the loss is the mean of the positives' mean and the negatives' mean.
/// With one negative per positive that is the plain mean over pairs (PyG's recipe); with batch
/// negatives, which outnumber positives about `P - 1` to 1, it keeps a `dot` decoder (no bias)
/// from collapsing every score to 0.
pub fn link_loss(
    decoder: PairDecoder,
    h: Tensor<2>,
    batch: &LinkBatch,
    batch_negatives: BatchNegatives,
) -> (Tensor<1>, usize) {
    let device = h.device();
    let n = batch.len();
    let pairs = batch.pairs(|_| true);
    let columns = if n > 1 { batch.grid_columns(batch_negatives) } else { Vec::new() };
    let grid_weights = (!columns.is_empty()).then(|| batch.grid_weights(&columns));
    let grid_count = grid_weights.as_ref().map_or(0, |w| w.iter().filter(|&&w| w > 0.0).count());
    let negatives = pairs.len() - n + grid_count;
    let ratio = if negatives == 0 { 0.0 } else { n as f32 / negatives as f32 };
    let mut sum = pairs_loss(decoder, h.clone(), &pairs, ratio);
    if let Some(grid) = grid_weights {
        let m = columns.len();
        let targets = columns.iter().map(|&(row, _, _)| row).collect();
        let scores = decoder
            .score_all(h.clone().select(0, rows(batch.source_rows(), &device)), h.select(0, rows(targets, &device)));
        let grid = Tensor::<2>::from_data(TensorData::new(grid, [n, m]), &device) * ratio;
        sum = sum + bce_sum(scores, Tensor::zeros([n, m], &device), grid);
    }
    (sum, if negatives == 0 { n } else { 2 * n })
}

/// The embeddings of a batch's endpoints, `[endpoints, d]`: the encoder's last layer.
pub fn encode(
    model: &Gnn,
    spec: &ModelSpec,
    batch: &LinkBatch,
    t: &BatchTensors,
    dropout: Option<Dropout>,
) -> Tensor<2> {
    model.forward(spec, &batch.batch, t, dropout)
}

/// What a link model computes on one link record, in evaluation mode.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkForward {
    pub src: i64,
    pub dst: i64,
    pub split: Option<Split>,
    pub negatives: Vec<i64>,
    /// Each endpoint's id and embedding: source, destination, then each negative.
    pub embeddings: Vec<(i64, Vec<f32>)>,
    /// The positive's score, then each negative's `(src, negative)`.
    pub scores: Vec<f32>,
}

/// The embeddings and pair scores of a loaded link model (see `crate::io::load`) on `links`,
/// in batches of 256 records, as the trainer evaluates them (no dropout; the reference
/// aggregation on one thread). `learned`: the model's learned embedding table, by node id (a
/// node without a row gets zeros, as in GraphInfer). What GraphInfer's link output is checked
/// against.
pub fn forward_links(
    meta: &ModelMeta,
    model: &Gnn,
    links: &[LinkRecord],
    learned: Option<&std::collections::HashMap<i64, Vec<f32>>>,
    device: &Device,
) -> Vec<LinkForward> {
    let spec =
        BatchSpec { kernel_threads: 1, distinct_inputs: true, ..BatchSpec::plain(meta.layers()) }.reading(&meta.spec);
    let decoder = PairDecoder::of(&meta.spec, model.decoder.as_ref());
    let d = meta.spec.classes;
    let mut out = Vec::with_capacity(links.len());
    for chunk in links.chunks(256) {
        let batch = LinkBatch::build(chunk, &spec);
        let mut tensors = BatchTensors::new(&batch.batch, device, Aggregation::Reference);
        if let Some(table) = learned {
            let width = meta.spec.learned_embedding_dim;
            let zeros = vec![0.0; width];
            let (ids, _) = batch.batch.learned_keys();
            let rows = ids.iter().flat_map(|id| table.get(id).unwrap_or(&zeros).iter().copied()).collect();
            tensors = tensors.with_learned(rows, width, device);
        }
        let h = encode(model, &meta.spec, &batch, &tensors, None);
        let pairs = batch.pairs(|_| true);
        let scores: Vec<f32> = score_pairs(decoder, h.clone(), &pairs).into_data().iter::<f32>().collect();
        let h: Vec<f32> = h.into_data().iter::<f32>().collect();
        let mut next_score = 0;
        for (i, link) in chunk.iter().enumerate() {
            let embeddings = link
                .endpoint_ids()
                .into_iter()
                .enumerate()
                .map(|(e, id)| (id, h[(batch.first[i] + e) * d..(batch.first[i] + e + 1) * d].to_vec()))
                .collect();
            let n = 1 + link.negatives.len();
            out.push(LinkForward {
                src: link.src,
                dst: link.dst,
                split: link.split,
                negatives: link.negatives.clone(),
                embeddings,
                scores: scores[next_score..next_score + n].to_vec(),
            });
            next_score += n;
        }
    }
    out
}
