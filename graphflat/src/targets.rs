//! Node records: the rounds over this worker's targets, batch by batch, and the part writer
//! behind them (a full run's, and a refresh's over its affected targets).

use std::rc::Rc;

use arrow_schema::SchemaRef;
use sampling::NodeStore;
use schemas::FlattenConfig;
use schemas::layers::Layers;
use stage::{Worker, Written};
use tables::parts::PartsOf;

use crate::error::Error;
use crate::record::AssembledColumns;
use crate::round::{Answered, Request, rounds};
use crate::write::{RecordStats, write_batches};

/// The rounds over this worker's targets, batch by batch, and the part writer behind them.
pub fn flatten_targets(
    worker: &mut Worker,
    config: &FlattenConfig,
    nodes: NodeStore,
    targets: &[i64],
    layers: Vec<Layers>,
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<Written<RecordStats>, Error> {
    let progress = worker.progress.clone();
    progress.add_total(0, targets.len() as u64);
    let batches: Vec<Vec<Request>> = targets
        .chunks(config.batch_size)
        .map(|batch| batch.iter().map(|&root| Request { root, node: root, hop: 0 }).collect())
        .collect();
    let columns = AssembledColumns::of(&nodes);
    let (nodes, layers): (_, Rc<[Layers]>) = (Rc::new(nodes), Rc::from(layers));
    let answered = Answered::default();
    let counted = answered.clone();
    let neighbors = config.root_neighbors;
    let mut written = write_batches(worker, config, schema, output, batches, columns, move |scope, requests| {
        rounds(scope, requests, nodes, layers, progress, counted, neighbors)
    })?;
    (written.own.answered, written.own.exchanged) = answered.counts();
    Ok(written)
}
