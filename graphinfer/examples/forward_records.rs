//! The naive way to score every node, for `bench/infer.sh`: read every flattened record (a
//! GraphFlat output) and run the trained model's forward pass on it, as the trainer evaluates,
//! in batches of 1024 records streamed row group by row group. Writes nothing: its time is a
//! lower bound on the naive job.
//!
//!     cargo run --release -p graphinfer --example forward_records -- RECORDS MODEL

use std::path::Path;
use std::time::Instant;

use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::BatchTensors;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (records, model) = match &args[..] {
        [_, records, model] => (Path::new(records), model.as_str()),
        _ => {
            eprintln!("usage: forward_records RECORDS MODEL");
            std::process::exit(64);
        }
    };
    let started = Instant::now();
    let device = Device::flex();
    let (meta, gnn) =
        gnn::io::load(&tables::Io::new(&schemas::StorageConfig::default()).expect("an I/O runtime"), model, &device)
            .expect("a model directory");
    let spec =
        BatchSpec { kernel_plans: true, kernel_threads: 1, distinct_inputs: true, ..BatchSpec::plain(meta.layers()) }
            .reading(&meta.spec);
    let mut files: Vec<_> = std::fs::read_dir(records)
        .expect("a records directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    let (mut scored, mut bytes, mut pending) = (0usize, 0u64, Vec::new());
    let mut forward = |pending: &mut Vec<schemas::Record>| {
        let batch = Batch::build(pending, &spec);
        let tensors = BatchTensors::new(&batch, &device, Aggregation::Auto);
        let scores = burn::tensor::activation::softmax(gnn.forward(&meta.spec, &batch, &tensors, None), 1);
        let _: Vec<f32> = scores.into_data().iter::<f32>().collect();
        scored += pending.len();
        pending.clear();
    };
    for path in &files {
        bytes += std::fs::metadata(path).map_or(0, |m| m.len());
        let file = std::fs::File::open(path).expect("a part file");
        let name = path.display().to_string();
        for batch in ParquetRecordBatchReaderBuilder::try_new(file).expect("Parquet").build().expect("a reader") {
            let batch = batch.expect("a row group");
            pending.extend(schemas::record::from_batch(&batch, &name, 0).expect("records"));
            while pending.len() >= 1024 {
                let rest = pending.split_off(1024);
                forward(&mut pending);
                pending = rest;
            }
        }
    }
    if !pending.is_empty() {
        forward(&mut pending);
    }
    println!(
        "forward_records: {scored} records from {:.1} MB of Parquet in {:.2}s ({:.0} records/s)",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        scored as f64 / started.elapsed().as_secs_f64()
    );
}
