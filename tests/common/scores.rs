//! GraphInfer's output read back, and the trainer's forward pass on flattened records: what the
//! consistency tests compare.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::BatchTensors;

use super::{local_io, read_batches, read_records};

/// One output row: (embedding, prediction, scores).
pub type Scored = (Vec<f32>, i64, Vec<f32>);

fn floats(list: &arrow_array::FixedSizeListArray, row: usize) -> Vec<f32> {
    list.value(row).as_primitive::<Float32Type>().values().to_vec()
}

/// GraphInfer's output by node id, read with parquet's Arrow reader.
pub fn read_scores(dir: &Path) -> BTreeMap<i64, Scored> {
    let mut out = BTreeMap::new();
    for batch in read_batches(dir) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let embedding = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        let prediction = batch.column_by_name("prediction").unwrap().as_primitive::<Int64Type>();
        let scores = batch.column_by_name("scores").unwrap().as_fixed_size_list();
        for r in 0..batch.num_rows() {
            let row = (floats(embedding, r), prediction.value(r), floats(scores, r));
            assert!(out.insert(ids.value(r), row).is_none(), "node {} written twice", ids.value(r));
        }
    }
    out
}

/// The trainer's forward pass (evaluation mode) of the saved model on every record: softmax
/// scores by root. Batches read what the model reads (its edge features, standardized as it
/// was trained, and its learned rows: zeros for a node without one, as GraphInfer).
pub fn record_scores(model: &Path, records: &Path) -> BTreeMap<i64, Vec<f32>> {
    let device = Device::flex();
    let (meta, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &device).unwrap();
    let width = meta.spec.learned_embedding_dim;
    let table = (width > 0).then(|| graphtrainer::learned_table(&local_io(), model.to_str().unwrap()).unwrap());
    let spec =
        BatchSpec { kernel_threads: 1, distinct_inputs: true, ..BatchSpec::plain(meta.layers()) }.reading(&meta.spec);
    let mut out = BTreeMap::new();
    for chunk in read_records(records).chunks(256) {
        let batch = Batch::build(chunk, &spec);
        let mut tensors = BatchTensors::new(&batch, &device, Aggregation::Reference);
        if let Some(table) = &table {
            let zeros = vec![0.0; width];
            let (ids, _) = batch.learned_keys();
            let rows = ids.iter().flat_map(|id| table.get(id).unwrap_or(&zeros).iter().copied()).collect();
            tensors = tensors.with_learned(rows, width, &device);
        }
        let logits = gnn.forward(&meta.spec, &batch, &tensors, None);
        let probabilities: Vec<f32> = burn::tensor::activation::softmax(logits, 1).into_data().iter::<f32>().collect();
        let classes = meta.spec.classes;
        for (i, root) in batch.roots.iter().enumerate() {
            out.insert(*root, probabilities[i * classes..(i + 1) * classes].to_vec());
        }
    }
    out
}

/// Largest absolute difference between two score maps over the same nodes.
pub fn max_difference(a: &BTreeMap<i64, Vec<f32>>, b: &BTreeMap<i64, Vec<f32>>) -> f32 {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "different nodes");
    a.iter().flat_map(|(id, x)| x.iter().zip(&b[id]).map(|(u, v)| (u - v).abs())).fold(0.0, f32::max)
}

pub fn scores_only(scored: &BTreeMap<i64, Scored>) -> BTreeMap<i64, Vec<f32>> {
    scored.iter().map(|(&id, s)| (id, s.2.clone())).collect()
}
