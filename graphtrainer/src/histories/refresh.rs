//! A refresh: every node's history `g_u = h̄_u / sqrt(d_u + 1)` with the current weights, where
//! `h̄_u = σ(Â X_u W0 + b0)` is the dense first layer's row of the node, without dropout, as
//! the trainer's forward pass computes it. Each worker reads every record of its share of the
//! units (every split, labeled or not: the plan gives every unit to one worker), computes its
//! roots' rows in chunks, and sets them at their owners; then the workers agree, so that no
//! step reads before every row is in place, and a failure on any worker ends them all.
//!
//! A refresh reads the record set once more per epoch: on the generated 1M graph with fanout
//! [2] that is the training pass's reading again (BENCHMARKS, "Control variates").

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

impl Histories {
    /// Sets every node's history with `params`; the workers agree at the end. Returns the
    /// nodes this worker set.
    pub fn refresh<T: Example>(&mut self, worker: &mut Worker, setup: &Setup<T>, params: &[f32]) -> Result<u64, Error> {
        let model = params::load(setup.template.clone(), params, &setup.base);
        let set = setup.source.set();
        let units: Vec<_> = setup.plan.shares[worker.index()].iter().map(|&u| setup.plan.units[u]).collect();
        let mut local = Ok(0u64);
        for unit in units {
            let records = match set.read_every(unit) {
                Ok(records) => records,
                Err(e) => {
                    local = Err(e);
                    break;
                }
            };
            for chunk in records.chunks(CHUNK) {
                let (ids, values) = rows(&model, setup, chunk);
                self.exchange.set(worker, &ids, &values);
                local = local.map(|n| n + ids.len() as u64);
            }
        }
        cluster::agree::<_, Error, tables::error::Report>(worker, local)
    }
}

/// The roots of `records` and their histories, row-major.
fn rows<T: Example>(model: &Gnn, setup: &Setup<T>, records: &[Record]) -> (Vec<i64>, Vec<f32>) {
    let device = &setup.base;
    let dim = setup.spec.input_dim;
    let n = records.len();
    let x: Vec<f32> = records.iter().flat_map(|r| r.node_features(0).iter().copied()).collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [n, dim]), device);
    let Layer::Gcn(dense) = &model.layers[0] else { panic!("control variates run a GCN") };
    // The dense first layer as the forward pass runs it: its self-loop weighs 1 / (0 + 1).
    let h = model.activate(&setup.spec, 0, x.matmul(dense.weight.val()) + dense.bias.val().unsqueeze::<2>());
    let scale: Vec<f32> = records.iter().map(|r| 1.0 / (r.in_degrees[0] as f32 + 1.0).sqrt()).collect();
    let g = h * Tensor::<2>::from_data(TensorData::new(scale, [n, 1]), device);
    let values = g.into_data().try_to_vec::<f32>().expect("f32 rows");
    (records.iter().map(|r| r.root).collect(), values)
}
