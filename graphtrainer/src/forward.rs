//! A link model's forward pass on link records, outside training: each endpoint's embedding
//! and each pair's score (see `gnn::link::forward_links`). GraphInfer's link output is checked
//! against it: its embeddings equal these for the same node, its pair scores the decoder's.

use std::collections::HashMap;
use std::sync::Arc;

use burn::prelude::*;
use gnn::link::{LinkForward, forward_links};
use schemas::learned::LearnedBatch;
use tables::Io;

use crate::error::Error;
use crate::reader::RecordSet;

/// The embeddings and scores of the link model in `model` (a directory or URI) on every link
/// record of the finished record set `records`, every split, in file and row order, computed
/// on the CPU as the trainer evaluates.
pub fn forward_link_records(io: &Arc<Io>, model: &str, records: &str) -> Result<Vec<LinkForward>, Error> {
    let device = Device::flex();
    let (meta, gnn) = gnn::io::load(io, model, &device)?;
    let table = match meta.spec.learned_embedding_dim {
        0 => None,
        _ => Some(learned_table(io, model)?),
    };
    let set = RecordSet::open(io.clone(), records)?;
    if set.meta.link.is_none() {
        return Err(Error::Usage(format!("{}: node records, not link records", set.place.shown())));
    }
    let mut out = Vec::new();
    for unit in set.units() {
        let links = set.read_links_where(unit, |_| true)?;
        out.extend(forward_links(&meta, &gnn, &links, table.as_ref(), &device));
    }
    Ok(out)
}

/// The whole learned embedding table of the model in `model`, by node key (a typed model's
/// typed key: `schemas::typed::pack`): a reference for tests (the stages never hold it whole).
/// A string id is taken as its hash `h` (`schemas::ids`): its internal id in any graph without
/// collided strings.
pub fn learned_table(io: &Arc<Io>, model: &str) -> Result<HashMap<i64, Vec<f32>>, Error> {
    let (meta, _) = gnn::io::load(io, model, &Device::flex())?;
    let dim = meta.spec.learned_embedding_dim;
    let names: Option<Vec<String>> = meta.spec.types.map(|t| t.node_types.into_iter().map(|n| n.name).collect());
    let dir = io.place(model)?;
    let files = tables::open_listed(io, &dir, |name| name.starts_with("part-") && name.ends_with(".parquet"))?;
    let mut table = HashMap::new();
    for file in &files {
        let name = file.name();
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, first_row| {
                let rows = LearnedBatch::from_batch(&batch, &name, first_row, dim, names.as_deref())?;
                table.extend((0..rows.len()).map(|i| (rows.key(i), rows.row(i).to_vec())));
                Ok(())
            })?;
        }
    }
    Ok(table)
}
