//! A link model's forward pass on link records, outside training: each endpoint's embedding
//! and each pair's score (see `gnn::link::forward_links`). GraphInfer's link output is checked
//! against it: its embeddings equal these for the same node, its pair scores the decoder's.

use std::sync::Arc;

use burn::prelude::*;
use gnn::link::{LinkForward, forward_links};
use tables::Io;

use crate::error::Error;
use crate::reader::RecordSet;

/// The embeddings and scores of the link model in `model` (a directory or URI) on every link
/// record of the finished record set `records`, every split, in file and row order, computed
/// on the CPU as the trainer evaluates.
pub fn forward_link_records(io: &Arc<Io>, model: &str, records: &str) -> Result<Vec<LinkForward>, Error> {
    let device = Device::flex();
    let (meta, gnn) = gnn::io::load(io, model, &device)?;
    let set = RecordSet::open(io.clone(), records)?;
    if set.meta.link.is_none() {
        return Err(Error::Usage(format!("{}: node records, not link records", set.place.shown())));
    }
    let mut out = Vec::new();
    for unit in set.units() {
        let links = set.read_links_where(unit, |_| true)?;
        out.extend(forward_links(&meta, &gnn, &links, &device));
    }
    Ok(out)
}
