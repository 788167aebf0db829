//! Full-graph link prediction: the encoder (the model's layers) runs over the whole graph as
//! for a node task ([`crate::full::epoch`]), and the decoder scores pairs of its last layer's
//! rows, one embedding per node however many pairs read it.
//!
//! **Which pairs.** The supervision edges are round 0's (every edge with a split, at the owner
//! of its source; valid and test edges never pass messages). Each is scored with `negatives`
//! negative destinations drawn as GraphFlat draws them (`sampling::negatives`: a pure function
//! of the seed, the edge and the draw): the training edges' afresh every epoch, with seed
//! `seed + epoch` (so epoch 0 draws what a flatten with the job's seed draws), the valid and
//! test edges' once, with the job's seed, so every epoch is evaluated on the same pairs.
//!
//! **Where.** A pair is scored at the owner of its source. Its other endpoint is a row of the
//! *endpoint halo* ([`Halo::of_ids`]): pulled from its owner after the last layer and its
//! gradient pushed back before the backward pass, as the layers' halo is (exactly; the stale
//! exchange applies to the layers' rows only).
//!
//! **The loss** is the record trainer's without batch negatives (`gnn::link::link_loss`):
//! binary cross-entropy with logits, a positive weighing 1 and a negative `1 / negatives`,
//! summed, and divided by the server by twice the positives of every worker. One epoch is
//! therefore one step on every training edge at once: exactly the record trainer's step on
//! the same edges' records (with every in-edge) in one batch.
//!
//! **Evaluation** scores every valid and test pair from the evaluation pass's rows; worker 0
//! gathers the scores and computes AUC, MRR and Hits@K (`crate::link::gather`).

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::Gnn;
use gnn::decoder::PairDecoder;
use gnn::link::{Pairs, pairs_loss, score_pairs};
use gnn::params;
use sampling::negatives::Negatives;
use sampling::{NodeStore, SupervisionEdge};
use schemas::job::TrainConfig;
use schemas::model::ModelSpec;
use schemas::task::DEFAULT_NEGATIVES;
use schemas::{NegativeSampler, Split};
use timely::worker::Worker;

use crate::error::Error;
use crate::full::halo::{Directory, Halo};
use crate::link::Scored;
use crate::metrics::Scores;
use crate::ps::Stats;

/// Pairs to score on this worker: each supervision edge's positive, then its negatives, as
/// rows of `[own | endpoint halo]`.
pub struct Scoring {
    halo: Halo,
    pairs: Pairs,
    /// Each edge's split (valid and test are evaluated), in pair order.
    splits: Vec<Split>,
    negatives: usize,
}

impl Scoring {
    /// `edges` with `negatives[i]` drawn for edge `i`; every worker calls it in step.
    fn plan(
        worker: &mut Worker,
        nodes: &Directory,
        edges: &[SupervisionEdge],
        negatives: &[Vec<i64>],
        count: usize,
    ) -> Result<Scoring, Error> {
        let mut ids = Vec::with_capacity(edges.len() * (2 + count));
        for (e, drawn) in edges.iter().zip(negatives) {
            ids.push(e.src);
            ids.push(e.dst);
            ids.extend_from_slice(drawn);
        }
        let (halo, rows) = Halo::of_ids(worker, nodes, &ids)
            .ok_or_else(|| Error::Internal("a supervision edge or a negative names a node no worker holds".into()))?;
        let mut pairs = Pairs::default();
        for edge in rows.chunks(2 + count) {
            for (j, &row) in edge[1..].iter().enumerate() {
                pairs.src.push(edge[0]);
                pairs.dst.push(row);
                pairs.labels.push(if j == 0 { 1.0 } else { 0.0 });
            }
        }
        Ok(Scoring { halo, pairs, splits: edges.iter().map(|e| e.split).collect(), negatives: count })
    }

    /// The supervision edges scored here.
    pub fn edges(&self) -> usize {
        self.splits.len()
    }

    /// `[own | endpoint halo]` rows from this worker's `own` rows (`[own, d]`), the halo's
    /// pulled from their owners (every worker in step).
    fn endpoint_rows(&self, worker: &mut Worker, own: &[f32], d: usize) -> Vec<f32> {
        let halo = self.halo.pull(worker, own, d);
        own.iter().copied().chain(halo).collect()
    }
}

/// This worker's supervision edges, the negatives' draw tables and the evaluation pairs.
pub struct LinkTask {
    nodes: Directory,
    draws: Negatives,
    negatives: usize,
    seed: u64,
    train: Vec<SupervisionEdge>,
    pub eval: Scoring,
    /// Every worker's validation edges.
    pub valid_edges: u64,
    /// The supervision edges' table, as errors name it.
    table: String,
}

impl LinkTask {
    /// The task over round 0's `supervision` edges (this worker's; `edges_table` names their
    /// table in errors), negatives drawn from the nodes of `negatives_type` (a typed graph's
    /// link relation's destination type; `None`: every node); every worker in step. Nothing to
    /// learn is an error on every worker alike.
    pub fn new(
        worker: &mut Worker,
        config: &TrainConfig,
        nodes: &NodeStore,
        supervision: Vec<SupervisionEdge>,
        (edges_table, negatives_type): (&str, Option<u8>),
    ) -> Result<LinkTask, Error> {
        let negatives = config.negatives.unwrap_or(DEFAULT_NEGATIVES);
        let sampler = config.negative_sampler.unwrap_or(NegativeSampler::Uniform);
        let (train, eval): (Vec<_>, Vec<_>) = supervision.into_iter().partition(|e| e.split == Split::Train);
        let count = |split| eval.iter().filter(|e: &&SupervisionEdge| e.split == split).count() as u64;
        let train_edges = cluster::sum(worker, train.len() as u64);
        let valid_edges = cluster::sum(worker, count(Split::Valid));
        check_learnable(train_edges, edges_table)?;
        let draws = Negatives::new(worker, nodes, sampler, negatives_type);
        if !draws.can_draw() {
            return Err(Error::NothingToLearn(format!(
                "{edges_table}: no node can be drawn as a negative: every node has weight 0 under negative_sampler = \
                 \"{}\" (no message-passing edge); set negative_sampler = \"uniform\"",
                sampler.name()
            )));
        }
        let directory = Directory::of(nodes);
        let pairs: Vec<(i64, i64)> = eval.iter().map(|e| (e.src, e.dst)).collect();
        let drawn = draws.draw(worker, config.seed, &pairs, negatives)?;
        let eval = Scoring::plan(worker, &directory, &eval, &drawn, negatives)?;
        let table = edges_table.to_owned();
        Ok(LinkTask { nodes: directory, draws, negatives, seed: config.seed, train, eval, valid_edges, table })
    }

    /// Pairs this worker scores: its training edges' and its valid and test edges', each
    /// with its negatives.
    pub fn pairs(&self) -> usize {
        (self.train.len() + self.eval.edges()) * (1 + self.negatives)
    }

    /// Epoch `epoch`'s training pairs: fresh negatives, drawn with seed `seed + epoch`.
    pub fn train_pairs(&self, worker: &mut Worker, epoch: usize) -> Result<Scoring, Error> {
        let pairs: Vec<(i64, i64)> = self.train.iter().map(|e| (e.src, e.dst)).collect();
        let drawn = self.draws.draw(worker, self.seed.wrapping_add(epoch as u64), &pairs, self.negatives)?;
        Scoring::plan(worker, &self.nodes, &self.train, &drawn, self.negatives)
    }
}

/// No training edge: the same on every worker (the count is every worker's).
fn check_learnable(train: u64, table: &str) -> Result<(), Error> {
    if train == 0 {
        return Err(Error::NothingToLearn(format!(
            "{table}: no edge has split \"train\"; give the edge table's split column train edges (graphflat \
             split-edges writes one)"
        )));
    }
    Ok(())
}

impl LinkTask {
    /// Early stopping needs validation edges (the same on every worker).
    pub fn check_patience(&self, patience: usize) -> Result<(), Error> {
        if patience > 0 && self.valid_edges == 0 {
            return Err(Error::NothingToLearn(format!(
                "{}: patience = {patience} stops early on the validation AUC, and no edge has split \"valid\"; set \
                 patience = 0, or split valid edges (graphflat split-edges --valid)",
                self.table
            )));
        }
        Ok(())
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 values")
}

/// The link loss of one training pass on this worker.
pub struct Loss {
    /// The gradient of the loss sum with respect to this worker's last-layer rows (`[own,
    /// d]`): its own pairs' part and what other workers' pairs pushed back.
    pub upstream: Vec<f32>,
    /// The gradient of the decoder's parameters (the whole parameter vector, zeros elsewhere).
    pub grad: Vec<f32>,
    /// Twice this worker's positives: the server divides the summed gradient by every
    /// worker's total, as the record trainer's `link_loss` counts.
    pub count: u64,
    pub stats: Stats,
}

/// The loss of `scoring`'s pairs from the last layer's rows `output` (`[own, d]`, on the
/// autodiff device) with `model`'s decoder. Every worker calls it in step (the endpoint rows
/// cross both ways).
pub fn train_loss(worker: &mut Worker, scoring: &Scoring, model: &Gnn, spec: &ModelSpec, output: &Tensor<2>) -> Loss {
    let [own, d] = output.dims();
    let device = output.device();
    let rows = scoring.endpoint_rows(worker, &values(output.clone().detach()), d);
    let mut upstream = vec![0.0; own * d];
    let mut halo_grads = vec![0.0; scoring.halo.len() * d];
    let mut grad = Vec::new();
    let mut stats = Stats::default();
    if !scoring.pairs.is_empty() {
        let leaf = Tensor::<2>::from_data(TensorData::new(rows, [own + scoring.halo.len(), d]), &device).require_grad();
        let decoder = PairDecoder::of(spec, model.decoder.as_ref());
        let sum = pairs_loss(decoder, leaf.clone(), &scoring.pairs, 1.0 / scoring.negatives as f32);
        stats.loss_sum = f64::from(values(sum.clone().detach())[0]);
        let grads = sum.backward();
        grad = params::gradients(model, &grads);
        let g = leaf.grad(&grads).map_or_else(|| vec![0.0; (own + scoring.halo.len()) * d], values);
        let (mine, halo) = g.split_at(own * d);
        upstream.copy_from_slice(mine);
        halo_grads.copy_from_slice(halo);
    }
    scoring.halo.push_back(worker, &halo_grads, d, &mut upstream);
    let count = 2 * scoring.edges() as u64;
    stats.loss_rows = count;
    Loss { upstream, grad, count, stats }
}

/// The valid and test metrics from the evaluation pass's last-layer rows (`own`, `d` each)
/// with `model`'s decoder (on `device`): every pair scored here, gathered at worker 0 (every
/// worker in step).
pub fn evaluate(
    worker: &mut Worker,
    eval: &Scoring,
    (model, spec, device): (&Gnn, &ModelSpec, &Device),
    own: &[f32],
    d: usize,
) -> Scores {
    let rows = eval.endpoint_rows(worker, own, d);
    let mut scored: Vec<Scored> = Vec::with_capacity(eval.edges());
    if !eval.pairs.is_empty() {
        let h = Tensor::<2>::from_data(TensorData::new(rows, [own.len() / d + eval.halo.len(), d]), device);
        let scores = values(score_pairs(PairDecoder::of(spec, model.decoder.as_ref()), h, &eval.pairs));
        for (edge, split) in scores.chunks(1 + eval.negatives).zip(&eval.splits) {
            let code = if *split == Split::Valid { 1 } else { 2 };
            scored.push((code, edge[0].to_bits(), edge[1..].iter().map(|s| s.to_bits()).collect()));
        }
    }
    crate::link::gather(worker, scored)
}
