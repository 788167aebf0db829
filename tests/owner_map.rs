//! Stages routed by a partition table (`partition = "PATH"` in `[flatten]` and `[infer]`): the
//! records, scores, embeddings and pair scores equal the hash-owned run's, row for row and bit
//! for bit (node, link and typed jobs, integer and string ids, learned rows, a table that names
//! some nodes only), on any cluster shape; fewer node rows cross workers, as each summary
//! states; a bad table is an error naming its file, row and column.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};

use crate::common::typed::{flatten_typed, graph_tables};
use crate::common::*;
use crate::string_ids::graphs;

/// `[partition]` of `data` (homogeneous) into `dir/<name>` in `parts` parts.
fn partition(dir: &Path, data: &Path, name: &str, parts: i64) -> PathBuf {
    let out = dir.join(name);
    let job = Job::table_named("partition")
        .key("nodes", location(data.join("nodes")))
        .key("edges", location(data.join("edges")))
        .key("output", location(&out))
        .key("parts", parts);
    run_ok(&job.write(dir, name), &["--workers", "2"]);
    out
}

/// The summary's `exchanged:` count (the first number on the line).
fn exchanged(stdout: &str) -> u64 {
    let line = stdout.lines().find(|l| l.trim_start().starts_with("exchanged:")).expect("an exchanged line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Every row of a table as text, sorted: the equality of two outputs.
fn rows(dir: &Path) -> Vec<String> {
    let rows = sorted_rows(&read_batches(dir));
    assert!(!rows.is_empty(), "{} holds no rows", dir.display());
    rows
}

/// Writes `batch` as a one-file table in `dir`.
fn write_table(dir: &Path, batch: &RecordBatch) {
    write_parquet(&dir.join("part-0.parquet"), batch);
}

/// The partition table's rows of every other node only, its part as `int64` (as pandas writes
/// it): the nodes it leaves out fall back to the hash.
fn every_other_node(parts: &Path, to: &Path) {
    let mut ids = Vec::new();
    let mut of = Vec::new();
    for batch in read_batches(parts) {
        let id = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let part = batch.column_by_name("part").unwrap().as_primitive::<arrow_array::types::Int32Type>();
        for r in (0..batch.num_rows()).step_by(2) {
            ids.push(id.value(r));
            of.push(i64::from(part.value(r)));
        }
    }
    let columns: Vec<(&str, ArrayRef)> =
        vec![("node_id", Arc::new(Int64Array::from(ids))), ("part", Arc::new(Int64Array::from(of)))];
    write_table(to, &RecordBatch::try_from_iter(columns).unwrap());
}

#[test]
fn node_records_and_scores_are_the_hash_owned_runs_on_any_cluster_shape_and_fewer_rows_cross() {
    let dir = scratch("owner-map");
    let data = dir.join("graph");
    generate(&data, 2_000, 8, 6, 3);
    let parts = partition(&dir, &data, "parts", 4);
    let half = dir.join("half-parts");
    every_other_node(&parts, &half);
    let flatten = |name: &str, map: Option<&Path>, args: &[&str]| {
        let mut job = Job::flatten(&data, dir.join(name)).key("hops", 2).key("fanouts", vec![6, 4]);
        job = job.key("hub_threshold", 25).key("seed", 2);
        if let Some(map) = map {
            job = job.key("partition", location(map));
        }
        run_ok(&job.write(&dir, name), args)
    };
    let hashed = flatten("flat", None, &["--workers", "2"]);
    let mapped = flatten("flat-parts", Some(&parts), &["--workers", "2"]);
    let records = read_records(&dir.join("flat"));
    assert!(records == read_records(&dir.join("flat-parts")), "the records differ with the partition");
    assert!(
        exchanged(&mapped) * 2 < exchanged(&hashed),
        "the partition should halve the rows between workers at least:\n{hashed}\n{mapped}"
    );
    flatten("flat-half", Some(&half), &["--workers", "3"]);
    assert!(records == read_records(&dir.join("flat-half")), "a table naming half the nodes");
    let procs = Job::loopback(2).and(
        Job::flatten(&data, dir.join("flat-procs"))
            .key("hops", 2)
            .key("fanouts", vec![6, 4])
            .key("hub_threshold", 25)
            .key("seed", 2)
            .key("partition", location(&parts)),
    );
    run_two_processes(&procs.write(&dir, "flat-procs"), &dir);
    assert!(records == read_records(&dir.join("flat-procs")), "the records differ on 2 processes");

    let model = dir.join("model");
    let train = Job::train(dir.join("flat"), &model).key("model", "sage").key("epochs", 2).key("batch_size", 128);
    run_ok(&train.write(&dir, "train"), &[]);
    let infer = |name: &str, map: Option<&Path>, args: &[&str]| {
        let mut job = Job::infer(&data, &model, dir.join(name)).key("hub_threshold", 6);
        if let Some(map) = map {
            job = job.key("partition", location(map));
        }
        run_ok(&job.write(&dir, name), args)
    };
    let hashed = infer("scores", None, &["--workers", "2"]);
    let mapped = infer("scores-parts", Some(&parts), &["--workers", "2"]);
    assert!(!hashed.contains("hubs split:    [0, 0]"), "no hub was split:\n{hashed}");
    let scores = rows(&dir.join("scores"));
    assert_eq!(scores, rows(&dir.join("scores-parts")), "the scores differ with the partition");
    assert!(exchanged(&mapped) * 2 < exchanged(&hashed), "{hashed}\n{mapped}");
    for (name, map, workers) in
        [("scores-one", &parts, "1"), ("scores-three", &parts, "3"), ("scores-half", &half, "2")]
    {
        infer(name, Some(map), &["--workers", workers]);
        assert_eq!(scores, rows(&dir.join(name)), "{name}");
    }
    assert_every_reader_reads_the_manifest(&[&dir.join("flat-parts"), &dir.join("scores-parts")]);
}

#[test]
fn link_records_learned_rows_and_pair_scores_on_string_ids_are_the_hash_owned_runs() {
    let dir = scratch("owner-map-strings");
    let (strings, _) = graphs(&dir, true);
    let parts = partition(&dir, &strings, "parts", 3);
    let run = |name: &'static str, map: Option<&Path>| {
        let base = dir.to_path_buf();
        let at = move |what: &str| base.join(format!("{name}-{what}"));
        let mut flatten = Job::flatten(&strings, at("flat")).key("task", "link").key("fanouts", vec![5, 5]);
        let mut infer = Job::infer(&strings, dir.join("model"), at("emb"))
            .key("pairs", location(strings.join("pairs")))
            .key("pairs_output", location(at("pairs")));
        if let Some(map) = map {
            flatten = flatten.key("partition", location(map));
            infer = infer.key("partition", location(map));
        }
        run_ok(&flatten.write(&dir, &format!("{name}-flatten")), &["--workers", "2"]);
        if map.is_none() {
            let train = Job::train(at("flat"), dir.join("model"))
                .key("model", "sage")
                .key("hidden", 16)
                .key("embedding_dim", 8)
                .key("learned_embedding_dim", 6)
                .key("epochs", 2)
                .key("batch_size", 32);
            run_ok(&train.write(&dir, "train"), &[]);
        }
        run_ok(&infer.write(&dir, &format!("{name}-infer")), &["--workers", "2"]);
        at
    };
    let (hashed, mapped) = (run("hashed", None), run("mapped", Some(&parts)));
    assert!(read_links(&hashed("flat")) == read_links(&mapped("flat")), "the link records differ");
    for table in ["emb", "pairs"] {
        assert_eq!(rows(&hashed(table)), rows(&mapped(table)), "{table} differs with the partition");
    }
}

#[test]
fn typed_records_and_scores_are_the_hash_owned_runs() {
    let dir = scratch("owner-map-typed");
    let data = dir.join("graph");
    graphflat_ok(&["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "1500", "--seed", "6"]);
    let parts = dir.join("parts");
    let text = format!("{}[partition]\noutput = {:?}\nparts = 2\n", graph_tables(&data), location(&parts));
    run_ok(&write_job(&dir, "partition", &text), &[]);
    let map = format!("partition = {:?}\nhub_threshold = 20\n", location(&parts));
    let hashed = flatten_typed(&dir, &data, "flat", "hub_threshold = 20\n", &["--workers", "2"]);
    let mapped = flatten_typed(&dir, &data, "flat-parts", &map, &["--workers", "2"]);
    assert!(read_records(&hashed) == read_records(&mapped), "the typed records differ");

    let model = dir.join("model");
    let train = format!(
        "[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 1\nbatch_size = 256\n",
        location(&hashed),
        location(&model)
    );
    run_ok(&write_job(&dir, "train", &train), &[]);
    let infer = |name: &str, keys: &str| {
        let out = dir.join(name);
        let text = format!(
            "{}[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\nhub_threshold = 4\n{keys}",
            graph_tables(&data),
            location(&model),
            location(&out)
        );
        run_ok(&write_job(&dir, name, &text), &["--workers", "2"]);
        rows(&out)
    };
    assert_eq!(infer("scores", ""), infer("scores-parts", &format!("partition = {:?}\n", location(&parts))));
}

#[test]
fn a_bad_partition_table_is_an_error_naming_its_file_row_and_column() {
    let dir = scratch("owner-map-bad");
    let data = dir.join("graph");
    generate(&data, 200, 4, 2, 1);
    let ids: Vec<i64> = read_batches(&data.join("nodes"))
        .iter()
        .flat_map(|b| b.column_by_name("node_id").unwrap().as_primitive::<Int64Type>().values().to_vec())
        .collect();
    let table = |name: &str, ids: Vec<i64>, parts: Vec<Option<i32>>| {
        let at = dir.join(name);
        let columns: Vec<(&str, ArrayRef)> =
            vec![("node_id", Arc::new(Int64Array::from(ids))), ("part", Arc::new(Int32Array::from(parts)))];
        write_table(&at, &RecordBatch::try_from_iter(columns).unwrap());
        at
    };
    let flatten = |name: &str, map: &Path| {
        let out = dir.join(format!("out-{name}"));
        let job = Job::flatten(&data, &out).key("partition", location(map));
        (run(&job.write(&dir, name), &["--workers", "2"]), out)
    };
    let cases = [
        ("negative", table("negative", vec![ids[0], ids[1], ids[2]], vec![Some(0), Some(1), Some(-1)]), "row 2"),
        ("null", table("null", vec![ids[0], ids[1]], vec![Some(0), None]), "row 1"),
        ("twice", table("twice", vec![ids[0], ids[1], ids[0]], vec![Some(0), Some(1), Some(1)]), "second time"),
    ];
    for (name, map, words) in cases {
        let (out, output) = flatten(name, &map);
        assert_fails(&out, 65, &["part-0.parquet", words]);
        assert!(!output.join("_SUCCESS").exists(), "{name}");
    }
    // String ids for a graph keyed by integers; no table at all; the output over the table.
    let strings = dir.join("strings");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("node_id", Arc::new(arrow_array::StringArray::from(vec!["a"]))),
        ("part", Arc::new(Int32Array::from(vec![0]))),
    ];
    write_table(&strings, &RecordBatch::try_from_iter(columns).unwrap());
    assert_fails(&flatten("strings", &strings).0, 65, &["strings/part-0.parquet", "node_id", "Utf8"]);
    assert_fails(&flatten("missing", &dir.join("nowhere")).0, 66, &["nowhere"]);
    let good = table("good", vec![ids[0]], vec![Some(0)]);
    let over = Job::flatten(&data, &good).key("partition", location(&good)).key("overwrite", true);
    assert_fails(&run(&over.write(&dir, "over"), &[]), 64, &["good"]);
    assert!(good.join("part-0.parquet").exists(), "the table was touched");
}
