//! A refresh: every node's history `g_u = h̄_u source(d_u)` (`gnn::control_variate::Weighing`)
//! with the current weights, where `h̄_u` is the dense first layer's row of the node without
//! dropout, as the trainer's forward pass computes it: `σ((Â X)_u W0 + b0)` for a GCN,
//! `σ([X | mean X]_u W_self + b0)` for GraphSAGE. Each worker reads the root of every record of
//! its share of the units (every split, labeled or not: the plan gives every unit to one
//! worker), off the decoded batches without building the records
//! ([`crate::reader::RecordSet::read_roots`]), decoded ahead on threads of their own
//! ([`ReadAhead`]: decoding is most of such a refresh); it computes their rows in chunks and
//! sets them at their owners; then the workers agree, so that no step reads before every row is
//! in place, and a failure on any worker ends them all.
//!
//! The first refresh, before any training step, keeps the roots' rows when they fit in
//! `cache_mb` ([`KeptRoots`]); the later ones read the record set again only where they did
//! not. The kept roots count against `cache_mb` as records do, held before the refresh reads,
//! and the records cached after them fit beside them. While the cache has room, a refresh that
//! reads also builds each unit's training records and offers them to the cache
//! ([`crate::stream::Source::offer`]), so that the next epoch does not decode them again; the
//! first does the same with the evaluation's records, which the first evaluation takes back
//! out of the cache as it builds the batches it keeps.
//!
//! Roots come first because they cost the least to keep: a refresh that does not keep them
//! reads every record of every split each epoch, while what they displace from the cache is at
//! most their own bytes of training records, and a root is a fraction of its record (the
//! precomputed row, the id and the degree, against the same row for each sampled in-neighbor,
//! the edges and the in-neighbor list).

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::control_variate::Weighing;
use gnn::model::Layer;
use gnn::{Gnn, params};
use schemas::Record;
use timely::worker::Worker;

use super::Histories;
use crate::error::Error;
use crate::eval::EvalCache;
use crate::example::Example;
use crate::reader::{Pass, Roots, Unit};
use crate::stream::ReadAhead;
use crate::train::Setup;

/// Roots computed at once.
const CHUNK: usize = 4096;

/// A chunk of roots as a refresh reads them: ids, precomputed rows and their histories'
/// factors, `source(d)`.
#[derive(Debug, Clone, Default)]
pub struct RootRows {
    ids: Vec<i64>,
    x: Vec<f32>,
    scale: Vec<f32>,
}

impl RootRows {
    /// Roots `range` of `roots`, whose feature vectors are `width` wide.
    fn of(roots: &Roots, range: std::ops::Range<usize>, width: usize, weighing: Weighing) -> Self {
        RootRows {
            ids: roots.ids[range.clone()].to_vec(),
            x: roots.features[range.start * width..range.end * width].to_vec(),
            scale: roots.in_degrees[range].iter().map(|&d| weighing.source(d as f32)).collect(),
        }
    }

    fn bytes(&self) -> u64 {
        (8 * self.ids.len() + 4 * self.x.len() + 4 * self.scale.len()) as u64
    }

    /// [`RootRows::bytes`] of one root of `width` precomputed values.
    fn bytes_per_root(width: usize) -> u64 {
        (8 + 4 * width + 4) as u64
    }
}

/// The roots a worker's refreshes read: kept from the first on when they fit in `cache_mb`;
/// else read again each time.
#[derive(Debug, Default)]
pub enum KeptRoots {
    #[default]
    Unknown,
    Kept(Vec<RootRows>),
    TooLarge,
}

impl Histories {
    /// The bytes of the roots this worker keeps between refreshes; `None` where it reads them
    /// again each time (or has not refreshed yet).
    pub fn kept_roots_bytes(&self) -> Option<u64> {
        match &self.roots {
            KeptRoots::Kept(kept) => Some(kept.iter().map(RootRows::bytes).sum()),
            KeptRoots::Unknown | KeptRoots::TooLarge => None,
        }
    }

    /// Sets every node's history with `params`; the workers agree at the end.
    pub fn refresh<T: Example>(&mut self, worker: &mut Worker, setup: &Setup<T>, params: &[f32]) -> Result<(), Error> {
        let model = params::load(setup.template.clone(), params, &setup.base);
        if let KeptRoots::Kept(kept) = &self.roots {
            for chunk in kept {
                let values = histories(&model, setup, chunk);
                self.exchange.set(worker, &chunk.ids, &values);
            }
            return cluster::agree::<_, Error, tables::error::Report>(worker, Ok(()));
        }
        let local = self.read_and_set(worker, setup, &model);
        cluster::agree::<_, Error, tables::error::Report>(worker, local)
    }

    /// A refresh that reads this worker's share of the units. The first decides, before it
    /// reads, whether the roots are kept: where they fit in the budget with what is cached, it
    /// holds their bytes, so that the records it offers to the cache fit beside them.
    fn read_and_set<T: Example>(&mut self, worker: &mut Worker, setup: &Setup<T>, model: &Gnn) -> Result<(), Error> {
        let units: Vec<Unit> = setup.plan.shares[worker.index()].iter().map(|&u| setup.plan.units[u]).collect();
        let keeping = matches!(self.roots, KeptRoots::Unknown) && self.hold_roots(setup, &units);
        let mut kept = Vec::new();
        let first = matches!(*setup.eval_cache.borrow(), EvalCache::Unknown);
        let source = setup.source.clone();
        let mut ahead = ReadAhead::new(units, move |unit| {
            // Records are built only to be offered: while the cache has room, training's, and
            // before the first evaluation (which keeps its batches) evaluation's too.
            let passes: &[Pass] = match (source.cached_bytes() < source.budget(), first) {
                (false, _) => &[],
                (true, false) => &[Pass::Train],
                (true, true) => &[Pass::Train, Pass::Evaluate],
            };
            Ok((unit, passes, source.set().read_roots(unit, passes)?))
        });
        let width = setup.spec.input_dim;
        while let Some((unit, passes, (roots, records))) = ahead.next()? {
            for start in (0..roots.ids.len()).step_by(CHUNK) {
                let chunk = RootRows::of(&roots, start..(start + CHUNK).min(roots.ids.len()), width, self.weighing);
                let values = histories(model, setup, &chunk);
                self.exchange.set(worker, &chunk.ids, &values);
                if keeping {
                    kept.push(chunk);
                }
            }
            // The next pass of each then finds the unit decoded, where it fits; training first.
            // Only the passes built: an empty vector offered for another would read as a unit
            // without records.
            for (pass, records) in by_pass(records).into_iter().filter(|(pass, _)| passes.contains(pass)) {
                if let Some(records) = T::of_pass(records, pass) {
                    setup.source.offer(unit, pass, records);
                }
            }
        }
        if keeping {
            self.roots = KeptRoots::Kept(kept);
        }
        Ok(())
    }

    /// Holds the bytes of the roots of `units` (a root per row: its id, degree factor and
    /// precomputed row) where they fit in the budget beside what is cached, and says whether
    /// it did; marks them too large otherwise.
    fn hold_roots<T: Example>(&mut self, setup: &Setup<T>, units: &[Unit]) -> bool {
        let set = setup.source.set();
        // The row groups' metadata claims the rows (checked as they are read): saturate.
        let rows = units.iter().fold(0u64, |n, u| n.saturating_add(set.files[u.file].row_group_rows(u.row_group)));
        let bytes = rows.saturating_mul(RootRows::bytes_per_root(setup.spec.input_dim));
        if bytes.saturating_add(setup.source.cached_bytes()) > setup.source.budget() {
            self.roots = KeptRoots::TooLarge;
            return false;
        }
        setup.source.hold(bytes);
        true
    }
}

/// A unit's records, training records first, then the others (evaluation's), each in row
/// order: vectors of their exact sizes, since the cache keeps them.
fn by_pass(records: Vec<Record>) -> [(Pass, Vec<Record>); 2] {
    let train = records.iter().filter(|r| Pass::Train.reads(r.split, r.label.is_some())).count();
    let (mut trains, mut others) = (Vec::with_capacity(train), Vec::with_capacity(records.len() - train));
    for r in records {
        match Pass::Train.reads(r.split, r.label.is_some()) {
            true => trains.push(r),
            false => others.push(r),
        }
    }
    [(Pass::Train, trains), (Pass::Evaluate, others)]
}

/// The histories of `roots`, row-major: the dense first layer as the forward pass runs it (a
/// GCN's self-loop weighs `1 / (0 + 1)`; GraphSAGE's mean over no in-edge is zero), activated,
/// times `source(d)`.
fn histories<T: Example>(model: &Gnn, setup: &Setup<T>, roots: &RootRows) -> Vec<f32> {
    let device = &setup.base;
    let n = roots.ids.len();
    let x = Tensor::<2>::from_data(TensorData::new(roots.x.clone(), [n, setup.spec.input_dim]), device);
    let dense = match &model.layers[0] {
        Layer::Gcn(gcn) => x.matmul(gcn.weight.val()) + gcn.bias.val().unsqueeze::<2>(),
        Layer::Sage(sage) => x.matmul(sage.self_weight.val()) + sage.bias.val().unsqueeze::<2>(),
        _ => unreachable!("control variates run a GCN or a GraphSAGE (train::check_control_variate)"),
    };
    let h = model.activate(&setup.spec, 0, dense);
    let g = h * Tensor::<2>::from_data(TensorData::new(roots.scale.clone(), [n, 1]), device);
    g.into_data().try_to_vec::<f32>().expect("f32 rows")
}
