//! Full-graph dropout, drawn per node, layer and epoch (never per worker), so that the copies
//! of a node's row are masked alike wherever they are read, as the one row of a full-batch
//! model is.

use gnn::model::Dropout;
use gnn::rng::Stream;

/// Keys full-graph dropout streams apart from the record batches' (`gnn::model`).
pub const FULL_GRAPH: u64 = 0xf011_6a4f;

/// The dropout stream of node `id`'s row in layer `layer`'s input.
pub fn row_stream(d: Dropout, id: i64, layer: usize) -> Stream {
    Stream::new(&[d.seed, d.step, id as u64, layer as u64, FULL_GRAPH])
}

/// Layer 0's input rows after dropout, drawn only at values that are not zero (the sparse
/// rows of bag-of-words features skip most draws; a zero stays zero either way).
pub fn drop_features(features: &[f32], ids: &[i64], width: usize, d: Dropout) -> Vec<f32> {
    let mut x = features.to_vec();
    if d.rate <= 0.0 || width == 0 {
        return x;
    }
    let scale = 1.0 / (1.0 - d.rate);
    for (row, &id) in x.chunks_mut(width).zip(ids) {
        let s = row_stream(d, id, 0);
        for (j, v) in row.iter_mut().enumerate().filter(|(_, v)| **v != 0.0) {
            *v *= if s.unit_at(j as u64) < d.rate { 0.0 } else { scale };
        }
    }
    x
}
