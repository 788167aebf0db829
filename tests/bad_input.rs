//! Every kind of bad input ends the job with a message naming what is wrong (file, row, column)
//! and leaves no `_SUCCESS`, on two workers (so the error must reach every worker).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, Int64Array, ListArray, RecordBatch, StringArray};

use crate::common::*;
use parquet::arrow::ArrowWriter;

fn features(rows: &[Vec<f32>]) -> ArrayRef {
    let lists = rows.iter().map(|r| Some(r.iter().map(|&v| Some(v)).collect::<Vec<_>>()));
    Arc::new(ListArray::from_iter_primitive::<arrow_array::types::Float32Type, _, _>(lists))
}

fn good_features(n: usize) -> Vec<Vec<f32>> {
    (0..n).map(|i| vec![i as f32, 1.0, -1.0]).collect()
}

fn write(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn nodes(data: &Path, ids: Vec<i64>, feats: Vec<Vec<f32>>) -> PathBuf {
    let path = data.join("nodes/part-0.parquet");
    let n = ids.len();
    write(
        &path,
        vec![
            ("node_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("features", features(&feats)),
            ("label", Arc::new(Int64Array::from(vec![Some(1); n]))),
            ("split", Arc::new(StringArray::from(vec![Some("train"); n]))),
        ],
    );
    path
}

fn edges(data: &Path, src: Vec<i64>, dst: Vec<i64>, weight: Vec<f32>) -> PathBuf {
    let path = data.join("edges/part-0.parquet");
    write(
        &path,
        vec![
            ("src", Arc::new(Int64Array::from(src)) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(dst))),
            ("weight", Arc::new(Float32Array::from(weight))),
        ],
    );
    path
}

/// The edge file `data/edges/<name>` of edges i -> i + 1 (mod the rows), with a `features`
/// column of `rows` (`None`: a null row).
fn edges_with_features(data: &Path, name: &str, rows: &[Option<Vec<f32>>]) -> PathBuf {
    let path = data.join("edges").join(name);
    let n = rows.len() as i64;
    let lists = rows.iter().map(|r| r.as_ref().map(|r| r.iter().map(|&v| Some(v)).collect::<Vec<_>>()));
    write(
        &path,
        vec![
            ("src", Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef),
            ("dst", Arc::new(Int64Array::from_iter_values((0..n).map(|i| (i + 1) % n)))),
            ("features", Arc::new(ListArray::from_iter_primitive::<arrow_array::types::Float32Type, _, _>(lists))),
        ],
    );
    path
}

fn good_edge_features(n: usize) -> Vec<Option<Vec<f32>>> {
    (0..n).map(|i| Some(vec![i as f32, 0.5])).collect()
}

fn good_edges(data: &Path) -> PathBuf {
    edges(data, vec![0, 1, 2, 3], vec![1, 2, 3, 0], vec![1.0; 4])
}

/// Runs a flatten of `data` and expects failure; returns the message. Checks no `_SUCCESS`.
fn fails(dir: &Path, data: &Path) -> String {
    fails_with(dir, data, |job| job)
}

/// The same, with the `[flatten]` keys that `settings` sets.
fn fails_with(dir: &Path, data: &Path, settings: impl FnOnce(Job) -> Job) -> String {
    let out = dir.join("flat");
    let job = settings(Job::flatten(data, &out).key("hops", 2).key("fanouts", vec![2, 2])).write(dir, "job");
    let output = run(&job, &["--workers", "2"]);
    let message = text(&output);
    assert!(!output.status.success(), "the job should fail:\n{message}");
    assert!(!out.join("_SUCCESS").exists(), "a failed job left _SUCCESS");
    message
}

fn assert_names(message: &str, file: &Path, row: Option<u64>, column: &str) {
    assert!(message.contains(&file.display().to_string()), "no file in: {message}");
    if let Some(row) = row {
        assert!(message.contains(&format!("row {row},")), "no row {row} in: {message}");
    }
    assert!(message.contains(&format!("column \"{column}\"")), "no column {column} in: {message}");
}

#[test]
fn missing_column() {
    let dir = scratch("bad-missing");
    let data = dir.join("data");
    let file = data.join("nodes/part-0.parquet");
    // `features` may be left out (nodes of no features); `node_id` may not.
    write(&file, vec![("features", features(&good_features(2)))]);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, None, "node_id");
    assert!(message.contains("missing required column"), "{message}");
}

#[test]
fn mistyped_column() {
    let dir = scratch("bad-type");
    let data = dir.join("data");
    let file = data.join("nodes/part-0.parquet");
    write(
        &file,
        vec![
            ("node_id", Arc::new(Float64Array::from(vec![0.0, 1.0, 2.0, 3.0])) as ArrayRef),
            ("features", features(&good_features(4))),
        ],
    );
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, None, "node_id");
    assert!(message.contains("expected ids: an integer") && message.contains("found Float64"), "{message}");
}

#[test]
fn duplicate_node_id() {
    let dir = scratch("bad-duplicate");
    let data = dir.join("data");
    let file = nodes(&data, vec![0, 1, 2, 3, 2], good_features(5));
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(4), "node_id");
    assert!(message.contains("duplicate node_id 2") && message.contains("row 2"), "{message}");
}

#[test]
fn edge_to_unknown_node() {
    let dir = scratch("bad-unknown");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    let file = edges(&data, vec![0, 1, 2, 3], vec![1, 2, 99, 0], vec![1.0; 4]);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(2), "dst");
    assert!(message.contains("unknown node 99"), "{message}");
}

/// The edge file `data/edges/part-0.parquet` of `edges` with a `split` column of `splits`.
fn edges_with_splits(data: &Path, edges: &[(i64, i64)], splits: Vec<Option<&str>>) -> PathBuf {
    let path = data.join("edges/part-0.parquet");
    write(
        &path,
        vec![
            ("src", Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.0))) as ArrayRef),
            ("dst", Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.1)))),
            ("split", Arc::new(StringArray::from(splits))),
        ],
    );
    path
}

/// A `split` other than train, valid, test or null is bad input (65) at its row, for every
/// stage that reads the edge table and for `split-edges` alike.
#[test]
fn bad_split_on_an_edge_names_file_row_and_column() {
    let dir = scratch("bad-edge-split");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    let file = edges_with_splits(
        &data,
        &[(0, 1), (1, 2), (2, 3), (3, 0)],
        vec![Some("train"), None, Some("holdout"), Some("test")],
    );
    let words = [file.display().to_string(), "row 2,".into(), "column \"split\"".into(), "\"holdout\"".into()];
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let out = dir.join("flat");
    let job = Job::flatten(&data, &out).key("hops", 2).write(&dir, "job");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &words);
    assert!(!out.join("_SUCCESS").exists(), "a failed job left _SUCCESS");

    let split = dir.join("split");
    let edges = data.join("edges");
    let output = graphflat()
        .env_remove("RUST_BACKTRACE")
        .args(["split-edges", "--edges", edges.to_str().unwrap(), "--out", split.to_str().unwrap()])
        .output()
        .unwrap();
    assert_fails(&output, 65, &words);
    assert!(!split.join("_SUCCESS").exists(), "a failed split left _SUCCESS");
}

/// A held-out edge passes no messages, but names known nodes all the same: the first row that
/// names an unknown node is found among held-out and message-passing edges alike.
#[test]
fn an_unknown_node_on_a_held_out_edge_is_named() {
    let dir = scratch("bad-held-out-unknown");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    let file = edges_with_splits(
        &data,
        &[(0, 1), (1, 2), (2, 42), (3, 0), (77, 1)],
        vec![Some("train"), None, Some("valid"), None, Some("train")],
    );
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(2), "dst");
    assert!(message.contains("unknown node 42"), "{message}");
}

/// Several unknown nodes, as source and destination: the error names the first row that names
/// one (row 1, its source), whichever worker owns which node.
#[test]
fn first_edge_to_an_unknown_node() {
    let dir = scratch("bad-unknown-first");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    let file = edges(&data, vec![0, 77, 2, 3, 55], vec![1, 2, 3, 88, 66], vec![1.0; 5]);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(1), "src");
    assert!(message.contains("unknown node 77"), "{message}");
}

#[test]
fn nan_feature_and_a_failed_rerun_keeps_the_old_output() {
    let dir = scratch("bad-nan");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    good_edges(&data);
    // A good run first: the failed re-run must leave it finished and readable.
    let out = dir.join("good");
    let job = Job::flatten(&data, &out).key("hops", 2).key("fanouts", vec![2, 2]).key("overwrite", true);
    let job_path = job.write(&dir, "good");
    run_ok(&job_path, &[]);
    let before = read_records(&out);

    let mut feats = good_features(4);
    feats[3][1] = f32::NAN;
    let file = nodes(&data, vec![0, 1, 2, 3], feats);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(3), "features");
    assert!(message.contains("NaN at position 1"), "{message}");
    let rerun = run(&job_path, &[]);
    assert!(!rerun.status.success() && text(&rerun).contains("NaN"), "{}", text(&rerun));
    assert!(read_records(&out) == before, "the failed re-run changed the finished output");
}

#[test]
fn infinite_feature() {
    let dir = scratch("bad-inf");
    let data = dir.join("data");
    let mut feats = good_features(4);
    feats[1][2] = f32::INFINITY;
    let file = nodes(&data, vec![0, 1, 2, 3], feats);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(1), "features");
    assert!(message.contains("infinite value at position 2"), "{message}");
}

#[test]
fn feature_length_mismatch() {
    let dir = scratch("bad-length");
    let data = dir.join("data");
    let mut feats = good_features(4);
    feats[2] = vec![1.0, 2.0];
    let file = nodes(&data, vec![0, 1, 2, 3], feats);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(2), "features");
    assert!(message.contains("feature length 2 differs from the table's 3"), "{message}");
}

/// A page whose bytes do not decode (its header garbled) is bad input too: the file, the first
/// row of the rows that failed and the column, found among the columns read.
#[test]
fn a_corrupt_page_names_file_row_and_column() {
    let dir = scratch("bad-page");
    let data = dir.join("data");
    let file = nodes(&data, (0..4).collect(), good_features(4));
    good_edges(&data);
    let reader = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let chunk = parquet::file::reader::FileReader::metadata(&reader).row_group(0).column(1).clone();
    assert_eq!(chunk.column_path().parts()[0], "features");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[chunk.data_page_offset() as usize..][..8].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&file, &bytes).unwrap();
    let out = dir.join("flat");
    let output = run(&Job::flatten(&data, &out).key("fanouts", vec![2, 2]).write(&dir, "job"), &["--workers", "2"]);
    let message = text(&output);
    assert_eq!(output.status.code(), Some(65), "{message}");
    assert!(!out.join("_SUCCESS").exists());
    assert_names(&message, &file, Some(0), "features");
    assert!(message.contains("rows 0..4 (row group 0) do not decode"), "{message}");
}

/// A NaN edge feature (in the first row, which sets the width, and in another), a row of
/// another length, a null row: each exits 65 naming file, row and column, with no `_SUCCESS`.
#[test]
fn bad_edge_features_name_file_row_and_column() {
    let cases: [(usize, Option<Vec<f32>>, &str); 4] = [
        (0, Some(vec![f32::NAN, 1.0]), "NaN at position 0"),
        (2, Some(vec![1.0, f32::NAN]), "NaN at position 1"),
        (3, Some(vec![1.0, 2.0, 3.0]), "feature length 3 differs from the table's 2 (the first row's)"),
        (1, None, "features are null"),
    ];
    for (row, value, problem) in cases {
        let dir = scratch("bad-edge-features");
        let data = dir.join("data");
        nodes(&data, (0..4).collect(), good_features(4));
        let mut rows = good_edge_features(4);
        rows[row] = value;
        let file = edges_with_features(&data, "part-0.parquet", &rows);
        let out = dir.join("flat");
        let output = run(&Job::flatten(&data, &out).key("fanouts", vec![2, 2]).write(&dir, "job"), &["--workers", "2"]);
        assert_fails(&output, 65, &[problem]);
        assert_names(&text(&output), &file, Some(row as u64), "features");
        assert!(!out.join("_SUCCESS").exists(), "a failed job left _SUCCESS");
    }
}

#[test]
fn edge_parts_without_the_features_of_the_others_are_named() {
    let dir = scratch("bad-edge-parts");
    let data = dir.join("data");
    nodes(&data, (0..4).collect(), good_features(4));
    edges_with_features(&data, "part-0.parquet", &good_edge_features(4));
    let second = data.join("edges/part-1.parquet");
    write(
        &second,
        vec![
            ("src", Arc::new(Int64Array::from(vec![1i64])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![3i64]))),
        ],
    );
    let message = fails(&dir, &data);
    assert_names(&message, &second, None, "features");
    assert!(message.contains("same columns"), "{message}");
}

#[test]
fn non_positive_weight_with_the_weighted_sampler() {
    let dir = scratch("bad-weight");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    let file = edges(&data, vec![0, 1, 2, 3], vec![1, 2, 3, 0], vec![1.0, 0.0, 2.0, 1.0]);
    let message = fails_with(&dir, &data, |job| job.key("sampler", "weighted"));
    assert_names(&message, &file, Some(1), "weight");
    assert!(message.contains("weight > 0, found 0"), "{message}");
    // The same table is fine for a sampler that does not draw by weight.
    flatten(&dir, &data, "uniform", &[], |job| job.key("sampler", "uniform"));
}

#[test]
fn empty_node_table() {
    let dir = scratch("bad-empty-nodes");
    let data = dir.join("data");
    nodes(&data, vec![], vec![]);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert!(
        message.contains(&data.join("nodes").display().to_string()) && message.contains("node table is empty"),
        "{message}"
    );
}

#[test]
fn empty_edge_table() {
    let dir = scratch("bad-empty-edges");
    let data = dir.join("data");
    nodes(&data, vec![0, 1, 2, 3], good_features(4));
    edges(&data, vec![], vec![], vec![]);
    let message = fails(&dir, &data);
    assert!(
        message.contains(&data.join("edges").display().to_string()) && message.contains("edge table is empty"),
        "{message}"
    );
}

#[test]
fn missing_table_directory() {
    let dir = scratch("bad-no-files");
    let data = dir.join("data");
    nodes(&data, vec![0, 1], good_features(2));
    let message = fails(&dir, &data);
    assert!(message.contains(&format!("{}: does not exist", data.join("edges").display())), "{message}");
}

#[test]
fn bad_job_file_names_the_key() {
    let dir = scratch("bad-job");
    let job = write_job(&dir, "job", "[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nfanout = [1, 2]\n");
    let output = run(&job, &[]);
    assert!(!output.status.success());
    let message = text(&output);
    assert!(message.contains("job.toml") && message.contains("fanout"), "{message}");
}

/// A node table with multi-hot targets (`list<float32>` labels).
fn nodes_with_targets(data: &Path, targets: &[Option<Vec<f32>>]) -> PathBuf {
    let path = data.join("nodes/part-0.parquet");
    let n = targets.len();
    let lists = targets.iter().map(|t| t.as_ref().map(|t| t.iter().map(|&v| Some(v)).collect::<Vec<_>>()));
    write(
        &path,
        vec![
            ("node_id", Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef),
            ("features", features(&good_features(n))),
            ("label", Arc::new(ListArray::from_iter_primitive::<arrow_array::types::Float32Type, _, _>(lists))),
        ],
    );
    path
}

#[test]
fn target_outside_zero_one() {
    let dir = scratch("bad-target-value");
    let data = dir.join("data");
    let file = nodes_with_targets(&data, &[Some(vec![0.0, 1.0]), None, Some(vec![1.0, 0.0]), Some(vec![0.0, 2.0])]);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(3), "label");
    assert!(message.contains("target 2 at position 1 is not in [0, 1]"), "{message}");
}

#[test]
fn targets_of_differing_lengths() {
    let dir = scratch("bad-target-length");
    let data = dir.join("data");
    // Row 0 is unlabeled: the table's length comes from row 1.
    let file =
        nodes_with_targets(&data, &[None, Some(vec![0.0, 1.0]), Some(vec![1.0, 0.0, 1.0]), Some(vec![1.0, 1.0])]);
    good_edges(&data);
    let message = fails(&dir, &data);
    assert_names(&message, &file, Some(2), "label");
    assert!(message.contains("3 targets, but the table's first labeled row has 2"), "{message}");
}

#[test]
fn a_footer_that_names_bytes_beyond_the_file_is_bad_data() {
    use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter, RowGroupMetaData};
    let dir = scratch("bad-footer");
    let data = dir.join("data");
    let path = nodes(&data, (0..4).collect(), good_features(4));
    good_edges(&data);
    // The same file with a footer whose column chunk claims a terabyte.
    let bytes = std::fs::read(&path).unwrap();
    let meta = ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(bytes.clone())).unwrap();
    let footer_len = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let body = &bytes[..bytes.len() - 8 - footer_len];
    let groups: Vec<RowGroupMetaData> = meta
        .row_groups()
        .iter()
        .map(|g| {
            let columns = g
                .columns()
                .iter()
                .map(|c| c.clone().into_builder().set_total_compressed_size(1 << 40).build().unwrap())
                .collect();
            g.clone().into_builder().set_column_metadata(columns).build().unwrap()
        })
        .collect();
    let meta = meta.into_builder().set_row_groups(groups).build();
    let mut out = body.to_vec();
    ParquetMetaDataWriter::new(&mut out, &meta).finish().unwrap();
    std::fs::write(&path, out).unwrap();
    let message = fails(&dir, &data);
    assert!(message.contains("part-0.parquet") && message.contains("corrupt"), "{message}");
}

#[test]
fn node_parts_without_a_column_of_the_others_and_empty_features_are_named() {
    let dir = scratch("bad-parts");
    let data = dir.join("data");
    nodes(&data, (0..4).collect(), good_features(4));
    good_edges(&data);
    let second = data.join("nodes/part-1.parquet");
    write(
        &second,
        vec![
            ("node_id", Arc::new(Int64Array::from(vec![4i64, 5])) as ArrayRef),
            ("features", features(&good_features(2))),
        ],
    );
    let message = fails(&dir, &data);
    assert_names(&message, &second, None, "label");
    assert!(message.contains("same columns"), "{message}");

    let empty = dir.join("empty");
    let path = nodes(&empty, (0..4).collect(), vec![vec![]; 4]);
    good_edges(&empty);
    let message = fails(&dir, &empty);
    assert_names(&message, &path, Some(0), "features");
    assert!(message.contains("empty feature vector") && !message.contains("flat/part-"), "{message}");
}

#[test]
fn a_failed_import_leaves_no_table_behind() {
    let dir = scratch("bad-import");
    let raw = dir.join("ogb/raw");
    std::fs::create_dir_all(&raw).unwrap();
    let gz = |name: &str, text: &str, keep: usize| {
        let bytes = gzip(text);
        std::fs::write(raw.join(name), &bytes[..keep.min(bytes.len())]).unwrap();
    };
    gz("node-feat.csv.gz", "1.0,2.0\n3.0,4.0\n5.0,6.0\n", usize::MAX);
    gz("node-label.csv.gz", "0\n1\n0\n", usize::MAX);
    let edges: String = (0..2000).map(|i| format!("{},{}\n", i % 3, (i + 1) % 3)).collect();
    gz("edge.csv.gz", &edges, 40);
    let out = dir.join("graph");
    let failed = graphflat()
        .args(["import", "ogb", dir.join("ogb").to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!failed.status.success(), "{}", text(&failed));
    assert!(text(&failed).contains("edge.csv.gz"), "{}", text(&failed));
    assert!(
        !out.join("nodes/_SUCCESS").exists() && !out.join("edges/_SUCCESS").exists(),
        "a failed import committed a table"
    );
}
