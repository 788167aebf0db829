//! Control variates (`[train] control_variate = true`; VR-GCN, Chen, Zhu and Song, ICML 2018):
//! every node's history of the last layer's input, kept on the parameter server's workers, and
//! what a step reads of it. The estimator itself is `gnn::control_variate`; what it costs and
//! what was measured is `docs/control-variates.md`.
//!
//! The model is a GCN over `[precompute]`'s `Â X` (or a GraphSAGE over its `[X | mean X]`)
//! with one sampled layer: layer 1 is dense, `h_u = σ(Â X_u W0 + b0)`, and the last layer sums
//! `h` over the root's in-edges (GraphSAGE: takes their mean). A record holds its root, its
//! sampled in-neighbors and the ids of all of them (`root_neighbors`). Each node's history is
//! `g_u = h̄_u source(d_u)` (GCN: `h̄_u / sqrt(d_u + 1)`; GraphSAGE: `h̄_u`), `hidden` values,
//! at its owner ([`shard`], [`exchange`]): bounded by the nodes a worker owns, on any cluster
//! shape.
//!
//! - **Refresh** ([`refresh`]): before the first epoch and after each epoch's last step, every
//!   worker computes the histories of its records' roots with the current weights (no dropout)
//!   and sets them at their owners; the workers then agree. Every node has a record (GraphFlat's
//!   default targets), so every node gets a history, and a step that reads a node without one
//!   fails naming it.
//! - **Step**: a batch reads the histories of its last layer's input rows and of its roots'
//!   in-neighbors, and estimates the sum (`gnn::control_variate::ControlVariate`).
//! - **Evaluation** runs right after a refresh, so every history equals its row: the estimate is
//!   the exact model over every in-edge whatever the sample (the estimator's first invariant).
//!   The model is saved to run over every in-edge (`fanouts` empty), which GraphInfer then does.

pub mod exchange;
pub mod refresh;
pub mod shard;

use std::cell::RefCell;
use std::rc::Rc;

use burn::prelude::Device;
use gnn::Batch;
use gnn::control_variate::{ControlVariate, HistoryRows, Weighing};
use timely::worker::Worker;

use crate::error::Error;
use exchange::Exchange;
use shard::HistoryShard;

/// This worker's share of the histories and its end of their exchange.
pub struct Histories {
    pub shard: Rc<RefCell<HistoryShard>>,
    /// How the model's last layer weighs in-edges: what a history row is kept weighed by.
    weighing: Weighing,
    exchange: Exchange,
    /// Where the records come from, for the error that names a missing node.
    records: String,
    /// The roots' rows, kept between refreshes where they fit.
    roots: refresh::KeptRoots,
    /// Refreshes so far, and the seconds they took (the summary's).
    pub refreshes: usize,
    pub seconds: f64,
}

impl Histories {
    /// Histories `width` wide (the model's `hidden`) for a last layer that weighs as
    /// `weighing`, for the records at `records`.
    pub fn new(worker: &mut Worker, (width, weighing): (usize, Weighing), records: String) -> Self {
        let shard = Rc::new(RefCell::new(HistoryShard::new(width)));
        let exchange = Exchange::new(worker, shard.clone());
        Histories { shard, weighing, exchange, records, roots: Default::default(), refreshes: 0, seconds: 0.0 }
    }

    /// What `batch`'s last layer reads for its estimate, on `device`.
    pub fn control_variate(
        &mut self,
        worker: &mut Worker,
        batch: &Batch,
        device: &Device,
    ) -> Result<ControlVariate, Error> {
        let ids = HistoryRows::needed(batch);
        let width = self.shard.borrow().width;
        // In the order the estimate reads them, repeats included (see `HistoryRows`).
        let values = self.exchange.get(worker, &ids).map_err(|id| {
            Error::Usage(format!(
                "control_variate reads every node's history, and the records in {} hold no record of node {id}, listed \
                 as an in-neighbor of a root: flatten every node (targets = \"all\", the default) of the graph the \
                 lists come from",
                self.records
            ))
        })?;
        Ok(ControlVariate::of(batch, &HistoryRows::new(values, width), self.weighing, device))
    }
}
