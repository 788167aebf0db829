//! Tables (node, edge and score outputs) read with parquet's Arrow reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Writes `batch` as the Parquet file `path` (its folder made first).
pub fn write_parquet(path: &Path, batch: &RecordBatch) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// Every `*.parquet` file under `dir`, in name order.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        // `_manifest.parquet` holds no rows: not a part.
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .collect();
    files.sort();
    files
}

/// Every batch of every part file in `dir`, which must hold `_SUCCESS`.
pub fn read_batches(dir: &Path) -> Vec<RecordBatch> {
    assert!(dir.join("_SUCCESS").exists(), "{} has no _SUCCESS", dir.display());
    batches_in(parquet_files(dir))
}

/// Every batch of the Parquet files `files`, in order.
pub fn batches_in(files: impl IntoIterator<Item = PathBuf>) -> Vec<RecordBatch> {
    files
        .into_iter()
        .flat_map(|path| {
            let file = std::fs::File::open(&path).unwrap();
            ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap().map(|b| b.unwrap())
        })
        .collect()
}

/// The node and edge tables as plain maps, read with parquet's Arrow reader.
pub struct Graph {
    pub features: BTreeMap<i64, Vec<f32>>,
    pub labels: BTreeMap<i64, Option<i64>>,
    /// (src, dst, weight) in table order.
    pub edges: Vec<(i64, i64, f32)>,
}

pub fn read_graph(data: &Path) -> Graph {
    let mut g = Graph { features: BTreeMap::new(), labels: BTreeMap::new(), edges: Vec::new() };
    for batch in read_batches(&data.join("nodes")) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let labels = batch.column_by_name("label").unwrap().as_primitive::<Int64Type>();
        let features = batch.column_by_name("features").unwrap().as_list::<i32>();
        for r in 0..batch.num_rows() {
            g.features.insert(ids.value(r), features.value(r).as_primitive::<Float32Type>().values().to_vec());
            g.labels.insert(ids.value(r), labels.is_valid(r).then(|| labels.value(r)));
        }
    }
    for batch in read_batches(&data.join("edges")) {
        let src = batch.column_by_name("src").unwrap().as_primitive::<Int64Type>();
        let dst = batch.column_by_name("dst").unwrap().as_primitive::<Int64Type>();
        let w = batch.column_by_name("weight").unwrap().as_primitive::<Float32Type>();
        for r in 0..batch.num_rows() {
            g.edges.push((src.value(r), dst.value(r), w.value(r)));
        }
    }
    g
}

/// Every row of a table as text, sorted (part boundaries differ from run to run).
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(move |r| b.columns().iter().map(|c| format!("{:?}", c.slice(r, 1))).collect::<Vec<_>>().join("|"))
        })
        .collect();
    rows.sort();
    rows
}

/// Every value of the int64 column `column` of the table `dir` with its part's file name and
/// 0-based row in that file, parts in name order.
pub fn read_column_i64(dir: &Path, column: &str) -> Vec<(String, u64, i64)> {
    let mut values = Vec::new();
    for path in parquet_files(dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut row = 0;
        for batch in batches_in([path]) {
            let array = batch.column_by_name(column).unwrap().as_primitive::<Int64Type>().clone();
            for i in 0..array.len() {
                if array.is_valid(i) {
                    values.push((name.clone(), row, array.value(i)));
                }
                row += 1;
            }
        }
    }
    values
}

/// Row `r` of an id column as text: its string, or its integer.
pub fn id_text(ids: &dyn Array, r: usize) -> String {
    match ids.data_type() {
        DataType::Utf8 => ids.as_string::<i32>().value(r).to_owned(),
        _ => ids.as_primitive::<Int64Type>().value(r).to_string(),
    }
}

/// The message-passing edges of an edge table (split null or "train") as (src, dst) text, in
/// table order; the table may be committed or hand-written (no `_SUCCESS`).
pub fn message_passing_edges(dir: &Path) -> Vec<(String, String)> {
    let mut edges = Vec::new();
    for batch in batches_in(parquet_files(dir)) {
        let (src, dst) = (batch.column_by_name("src").unwrap(), batch.column_by_name("dst").unwrap());
        let split = batch.column_by_name("split").map(|s| s.as_string::<i32>().clone());
        for r in 0..batch.num_rows() {
            if split.as_ref().is_none_or(|s| s.is_null(r) || s.value(r) == "train") {
                edges.push((id_text(src, r), id_text(dst, r)));
            }
        }
    }
    edges
}
