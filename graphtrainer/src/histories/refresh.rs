//! A refresh: every node's history `g_u = h̄_u / sqrt(d_u + 1)` with the current weights, where
//! `h̄_u = σ(Â X_u W0 + b0)` is the dense first layer's row of the node, without dropout, as
//! the trainer's forward pass computes it. Each worker reads every record of its share of the
//! units (every split, labeled or not: the plan gives every unit to one worker), computes its
//! roots' rows in chunks, and sets them at their owners; then the workers agree, so that no
//! step reads before every row is in place, and a failure on any worker ends them all.
//!
//! The first two refreshes read the worker's records; the second, after the training pass has
//! filled the records' cache, keeps their roots' rows when they fit beside it ([`KeptRoots`]),
//! and the later ones read the record set again only where they did not. (The evaluation
//! batches' own check does not count the kept roots: at worst a worker holds `cache_mb`'s share
//! plus its roots' rows.)

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::model::Layer;
use gnn::{Gnn, params};
use schemas::Record;
use timely::worker::Worker;

use super::Histories;
use crate::error::Error;
use crate::example::Example;
use crate::train::Setup;

/// Roots computed at once.
const CHUNK: usize = 4096;

/// A chunk of roots as a refresh reads them: ids, `Â X` rows and `1 / sqrt(d + 1)`.
#[derive(Debug, Clone, Default)]
pub struct RootRows {
    ids: Vec<i64>,
    x: Vec<f32>,
    scale: Vec<f32>,
}

impl RootRows {
    fn of(records: &[Record]) -> Self {
        RootRows {
            ids: records.iter().map(|r| r.root).collect(),
            x: records.iter().flat_map(|r| r.node_features(0).iter().copied()).collect(),
            scale: records.iter().map(|r| 1.0 / (r.in_degrees[0] as f32 + 1.0).sqrt()).collect(),
        }
    }

    fn bytes(&self) -> u64 {
        (8 * self.ids.len() + 4 * self.x.len() + 4 * self.scale.len()) as u64
    }
}

/// The roots a worker's refreshes read: kept from the second on when they fit beside the
/// records' cache (`cache_mb`), as the evaluation batches are; else read again each time.
#[derive(Debug, Default)]
pub enum KeptRoots {
    #[default]
    Unknown,
    Kept(Vec<RootRows>),
    TooLarge,
}

impl Histories {
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

    /// A refresh that reads this worker's share of the units. The one after the first epoch,
    /// when the training pass has filled the records' cache, keeps the roots if they fit beside
    /// it.
    fn read_and_set<T: Example>(&mut self, worker: &mut Worker, setup: &Setup<T>, model: &Gnn) -> Result<(), Error> {
        let set = setup.source.set();
        let deciding = matches!(self.roots, KeptRoots::Unknown) && self.refreshes > 0;
        let (mut kept, mut bytes) = (Vec::new(), 0u64);
        for &u in &setup.plan.shares[worker.index()] {
            let records = set.read_every(setup.plan.units[u])?;
            for records in records.chunks(CHUNK) {
                let chunk = RootRows::of(records);
                let values = histories(model, setup, &chunk);
                self.exchange.set(worker, &chunk.ids, &values);
                if deciding && matches!(self.roots, KeptRoots::Unknown) {
                    bytes += chunk.bytes();
                    if bytes + setup.source.cached_bytes() <= setup.source.budget() {
                        kept.push(chunk);
                    } else {
                        kept.clear();
                        self.roots = KeptRoots::TooLarge;
                    }
                }
            }
        }
        if deciding && matches!(self.roots, KeptRoots::Unknown) {
            self.roots = KeptRoots::Kept(kept);
        }
        Ok(())
    }
}

/// The histories of `roots`, row-major: the dense first layer as the forward pass runs it (its
/// self-loop weighs `1 / (0 + 1)`), activated, times `1 / sqrt(d + 1)`.
fn histories<T: Example>(model: &Gnn, setup: &Setup<T>, roots: &RootRows) -> Vec<f32> {
    let device = &setup.base;
    let n = roots.ids.len();
    let x = Tensor::<2>::from_data(TensorData::new(roots.x.clone(), [n, setup.spec.input_dim]), device);
    let Layer::Gcn(dense) = &model.layers[0] else { panic!("control variates run a GCN") };
    let h = model.activate(&setup.spec, 0, x.matmul(dense.weight.val()) + dense.bias.val().unsqueeze::<2>());
    let g = h * Tensor::<2>::from_data(TensorData::new(roots.scale.clone(), [n, 1]), device);
    g.into_data().try_to_vec::<f32>().expect("f32 rows")
}
