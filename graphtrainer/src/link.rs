//! Link records: the model is an encoder (the GNN, its last layer the embedding) and a pair
//! decoder (`gnn::decoder`), trained with binary cross-entropy over each record's positive and
//! negatives, plus in-batch negatives on request (see `gnn::link`). A step's "batch" is one
//! worker's batch: in-batch negatives pair the positives of that worker's `batch_size` records,
//! so with `n` workers a step scores `n` such grids.
//!
//! Evaluation scores every valid and test record's positive and negatives, in batches that
//! never span two row groups (each row group is evaluated whole by one worker, so a record's
//! scores are computed in the same batch whatever the number of workers); worker 0 gathers
//! every score, computes AUC, MRR and Hits@K (see [`crate::rank`]) and sends them to all.

use burn::prelude::*;
use gnn::decoder::PairDecoder;
use gnn::link::{LinkBatch, link_loss, score_pairs};
use gnn::model::{BatchTensors, Dropout, Gnn};
use gnn::params;
use schemas::record::LinkRecord;
use schemas::{BatchNegatives, Split, Task};
use timely::worker::Worker;

use crate::error::Error;
use crate::eval_pass;
use crate::metrics::Scores;
use crate::phases::{Lap, Phases};
use crate::ps::{Server, Stats};
use crate::rank::RankScores;
use crate::reader::{Counts, Pass, RecordSet};
use crate::task_keys::TaskKeys;
use crate::train::{Gradient, Head, Learner, Setup, TrainConfig, learned_gradient, with_learned};

impl Learner for LinkRecord {
    const TASK: Task = Task::Link;

    fn head(config: &TrainConfig, set: &RecordSet, totals: &Counts, keys: &TaskKeys) -> Result<Head, Error> {
        check_learnable(config, set, totals, keys)?;
        Ok(Head {
            classes: config.embedding_dim.unwrap_or(config.hidden),
            multi_label: false,
            task: Task::Link,
            decoder: Some(config.decoder),
        })
    }

    /// The gradient of the batch's loss sum and the count the server divides it by (see
    /// `gnn::link::link_loss`).
    fn gradient(
        setup: &Setup<LinkRecord>,
        _config: &TrainConfig,
        params: &[f32],
        batch: &LinkBatch,
        dropout: Dropout,
        phases: &mut Phases,
        learned: Option<Vec<f32>>,
        _: Option<gnn::control_variate::ControlVariate>,
    ) -> Gradient {
        let device = &setup.device;
        let mut lap = Lap::start();
        let model = params::load(setup.template.clone(), params, device);
        let tensors = BatchTensors::with_input_dropout(&batch.batch, dropout, device, setup.aggregation);
        let tensors = with_learned(tensors, learned, &setup.spec, device);
        phases.tensors_seconds += lap.lap();
        let h = model.forward(&setup.spec, &batch.batch, &tensors, Some(dropout));
        let (sum, count) =
            link_loss(PairDecoder::of(&setup.spec, model.decoder.as_ref()), h, batch, setup.keys.batch_negatives);
        phases.forward_seconds += lap.lap();
        let grads = sum.backward();
        phases.backward_seconds += lap.lap();
        // The loss and every gradient, read back in one transfer.
        let mut parts = vec![sum.inner().reshape([1])];
        let learned = learned_gradient(&tensors, &grads);
        let learned_len = learned.as_ref().map_or(0, |g| g.dims()[0]);
        parts.extend(learned);
        parts.extend(params::gradient_tensors(&model, &grads));
        let values = Tensor::cat(parts, 0).into_data().try_to_vec::<f32>().expect("f32 values");
        phases.read_seconds += lap.lap();
        let (loss_sum, mut rows) = (f64::from(values[0]), values[1..].to_vec());
        let grad = rows.split_off(learned_len);
        let mut stats = Stats::default();
        (stats.loss_sum, stats.loss_rows) = (loss_sum, count as u64);
        Gradient { grad, count: count as u64, stats, rows }
    }

    fn evaluate_epoch(
        worker: &mut Worker,
        config: &TrainConfig,
        setup: &Setup<LinkRecord>,
        server: &mut Server,
        params: &mut [f32],
        lr: f32,
        train: &mut Stats,
    ) -> Result<Scores, Error> {
        let scored = evaluate(worker, setup, config, params)?;
        // Waits for every step before it: late training stats (async mode) join the epoch's.
        let eval_step = server.steps_done();
        for (step, total) in server.step(worker, &[], 0, lr, Stats::default(), params, true, None) {
            if step != eval_step {
                train.add(&total);
            }
        }
        Ok(gather(worker, scored))
    }
}

/// Nothing to learn is an error on every worker alike (they share the plan's totals): no
/// training records, no negatives of any kind, a grid of batch negatives too large, or early
/// stopping asked for without validation records or negatives to rank them against.
fn check_learnable(config: &TrainConfig, set: &RecordSet, totals: &Counts, keys: &TaskKeys) -> Result<(), Error> {
    let place = set.place.shown();
    if config.classes.is_some() {
        return Err(Error::Usage(format!("[train] classes is a key of the node task, and {place} holds link records")));
    }
    let negatives = set.meta.link.as_ref().map_or(0, |l| l.negatives);
    let pool = keys.batch_negatives;
    if negatives == 0 && pool == BatchNegatives::Negatives {
        return Err(Error::Usage(format!(
            "the link records in {place} hold no negatives ([flatten] negatives = 0), and batch_negatives = \
             \"negatives\" pairs each source with the other records' negatives: set batch_negatives = \
             \"destinations\", or flatten with negatives >= 1"
        )));
    }
    if negatives == 0 && pool == BatchNegatives::Destinations && config.batch_size < 2 {
        return Err(Error::Usage(format!(
            "the link records in {place} hold no negatives ([flatten] negatives = 0), and batch negatives need \
             another record in the batch: batch_size = 1 leaves every step without a negative; raise batch_size"
        )));
    }
    if negatives == 0 && pool == BatchNegatives::None {
        return Err(Error::Usage(format!(
            "the link records in {place} hold no negatives ([flatten] negatives = 0) and [train] batch_negatives \
             = \"none\": there is nothing to tell edges from non-edges; set batch_negatives = \"destinations\", \
             or flatten with negatives >= 1"
        )));
    }
    config.check_batch_grid(pool, negatives).map_err(|e| Error::Usage(e.to_string()))?;
    if totals.train == 0 {
        return Err(Error::NothingToLearn(format!(
            "{place}: no training link records (split \"train\"); give the edge table's split column train edges"
        )));
    }
    if config.patience.is_some_and(|p| p > 0) && (totals.valid == 0 || negatives == 0) {
        return Err(Error::NothingToLearn(format!(
            "{place}: patience = {} stops early on the validation AUC, but there are {} validation records with {} \
             negatives each; set patience = 0, or flatten valid edges with negatives",
            keys.patience, totals.valid, negatives
        )));
    }
    Ok(())
}

/// One evaluated record: its split (1 valid, 2 test), its positive's score and its negatives'
/// scores, as bits (ordered and hashable, for the exchange).
pub(crate) type Scored = (u8, u32, Vec<u32>);

/// This worker's valid and test records, scored, one stream per unit (see the module doc).
fn evaluate(
    worker: &mut Worker,
    setup: &Setup<LinkRecord>,
    config: &TrainConfig,
    params: &[f32],
) -> Result<Vec<Scored>, Error> {
    let model = params::load(setup.template.clone(), params, &setup.base);
    let groups: Vec<_> = setup.units(Pass::Evaluate).iter().map(|&u| vec![u]).collect();
    let mut out = Vec::new();
    let index = worker.index();
    eval_pass::for_each_batch(setup, config, index, &groups, |batch, tensors| {
        let tensors = eval_pass::with_rows(worker, setup, batch, tensors);
        out.extend(score_batch(setup, &model, batch, &tensors))
    })?;
    Ok(out)
}

fn score_batch(setup: &Setup<LinkRecord>, model: &Gnn, batch: &LinkBatch, tensors: &BatchTensors) -> Vec<Scored> {
    let h = model.forward(&setup.spec, &batch.batch, tensors, None);
    let scores: Vec<f32> = score_pairs(PairDecoder::of(&setup.spec, model.decoder.as_ref()), h, &batch.pairs(|_| true))
        .into_data()
        .iter::<f32>()
        .collect();
    let mut at = 0;
    let mut out = Vec::with_capacity(batch.len());
    for (i, split) in batch.splits.iter().enumerate() {
        let n = 1 + batch.negatives[i];
        let code = match split {
            Some(Split::Valid) => 1,
            Some(Split::Test) => 2,
            _ => 0,
        };
        out.push((code, scores[at].to_bits(), scores[at + 1..at + n].iter().map(|s| s.to_bits()).collect()));
        at += n;
    }
    out
}

/// Every worker's scored records at worker 0, which computes each split's metrics and sends
/// them to every worker.
pub(crate) fn gather(worker: &mut Worker, scored: Vec<Scored>) -> Scores {
    let all = cluster::exchange(worker, scored, |_| 0);
    let metrics = (worker.index() == 0).then(|| {
        let split = |code: u8| {
            let records: Vec<(f32, Vec<f32>)> = all
                .iter()
                .filter(|(c, _, _)| *c == code)
                .map(|(_, p, n)| (f32::from_bits(*p), n.iter().map(|&b| f32::from_bits(b)).collect()))
                .collect();
            let s = RankScores::of(&records);
            [s.auc, s.mrr, s.hits10, s.hits50].map(f64::to_bits)
        };
        [split(1), split(2)].concat()
    });
    let bits = cluster::broadcast(worker, metrics).unwrap_or_default();
    let scores = |at: usize| {
        let f = |i: usize| bits.get(at + i).map_or(f64::NAN, |&b| f64::from_bits(b));
        RankScores { auc: f(0), mrr: f(1), hits10: f(2), hits50: f(3) }
    };
    Scores::Link { valid: scores(0), test: scores(4) }
}
