//! Graphs keyed by strings, end to end. A graph whose ids are strings (nodes as `utf8`, edge
//! sources as `large_utf8`, destinations as a dictionary, pairs as `utf8_view`) gives exactly
//! the results of the same graph keyed by the strings' internal ids (`schemas::ids`: each
//! string's 54-bit hash, where none collide), the reference computed here: the same records,
//! model weights, learned table, embeddings, scores and pair scores, bit for bit; and every
//! output carries the original strings (records in
//! `node_keys`, the others in their id columns), as pandas and DuckDB read them. Bad ids exit
//! 65 naming file, row and column, with nothing committed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int32Array, Int64Array, LargeStringArray, RecordBatch, StringArray,
    StringViewArray,
};
use arrow_schema::{Field, Schema};
use schemas::ids::StringHash;

/// Node `id`'s string: prefixes and lengths of both sides of 8 bytes, and a non-ASCII letter.
fn key(id: i64) -> String {
    match id % 3 {
        0 => format!("user_{id:x}"),
        1 => format!("sku-{id}-é"),
        _ => format!("account/{:08}/{}", id * 7919, id % 11),
    }
}

/// The internal id of `key` in a graph without collided strings.
fn internal(key: &str) -> i64 {
    StringHash::of(key).h
}

/// An id column of `ids` turned into: the strings of [`key`] in `encoding`, or their internal
/// ids (`None`).
fn id_column(ids: &Int64Array, encoding: Option<&str>) -> ArrayRef {
    let keys: Vec<String> = ids.values().iter().map(|&id| key(id)).collect();
    match encoding {
        None => Arc::new(Int64Array::from_iter_values(keys.iter().map(|k| internal(k)))),
        Some("utf8") => Arc::new(StringArray::from_iter_values(&keys)),
        Some("large_utf8") => Arc::new(LargeStringArray::from_iter_values(&keys)),
        Some("utf8_view") => Arc::new(StringViewArray::from_iter_values(&keys)),
        Some(_) => {
            let mut values: Vec<&String> = keys.iter().collect();
            values.sort();
            values.dedup();
            let at: Int32Array = keys.iter().map(|k| values.binary_search(&k).unwrap() as i32).collect();
            let values = StringArray::from_iter_values(values);
            Arc::new(DictionaryArray::<Int32Type>::try_new(at, Arc::new(values)).unwrap())
        }
    }
}

/// The table in `from` with its id `columns` (name, string encoding) rewritten, as one file in
/// `to`; `strings`: the strings, else their internal ids. Other columns go as they are, but
/// `drop`.
fn rekeyed(from: &[RecordBatch], to: &Path, columns: &[(&str, &str)], strings: bool, drop: &[&str]) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    let batches: Vec<RecordBatch> = from
        .iter()
        .map(|b| {
            let (mut fields, mut arrays): (Vec<Field>, Vec<ArrayRef>) = (Vec::new(), Vec::new());
            for (field, array) in b.schema().fields().iter().zip(b.columns()) {
                if drop.contains(&field.name().as_str()) {
                    continue;
                }
                let array = match columns.iter().find(|(c, _)| c == field.name()) {
                    Some((_, encoding)) => id_column(array.as_primitive::<Int64Type>(), strings.then_some(*encoding)),
                    None => array.clone(),
                };
                fields.push(Field::new(field.name(), array.data_type().clone(), field.is_nullable()));
                arrays.push(array);
            }
            RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
        })
        .collect();
    let file = std::fs::File::create(to.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    batches.iter().for_each(|b| writer.write(b).unwrap());
    writer.close().unwrap();
    to.to_path_buf()
}

/// A generated graph (split for the link task, `features` dropped unless `features`) keyed by
/// strings in `dir/strings`, and by their internal ids in `dir/ints`; with candidate pairs.
pub(crate) fn graphs(dir: &Path, features: bool) -> (PathBuf, PathBuf) {
    let generated = dir.join("generated");
    generate(&generated, 300, 6, 4, 5);
    let (edges, split) = (generated.join("edges"), generated.join("split"));
    let args = ["split-edges", "--edges", edges.to_str().unwrap(), "--out", split.to_str().unwrap(), "--seed", "3"];
    graphflat_ok(&[&args[..], &["--valid", "0.1", "--test", "0.1", "--undirected"]].concat());
    let nodes = read_batches(&generated.join("nodes"));
    let ids: Vec<i64> = nodes.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
    let pairs: Vec<(i64, i64)> =
        ids.iter().step_by(5).zip(ids.iter().skip(2).step_by(3)).map(|(&a, &b)| (a, b)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("src", arrow_schema::DataType::Int64, false),
        Field::new("dst", arrow_schema::DataType::Int64, false),
    ]));
    let (src, dst): (Vec<i64>, Vec<i64>) = pairs.into_iter().unzip();
    let pairs = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(src)), Arc::new(Int64Array::from(dst))]);
    let pairs = vec![pairs.unwrap()];
    let drop: &[&str] = if features { &[] } else { &["features"] };
    let edges = read_batches(&split);
    for (name, strings) in [("strings", true), ("ints", false)] {
        let to = dir.join(name);
        rekeyed(&nodes, &to.join("nodes"), &[("node_id", "utf8")], strings, drop);
        rekeyed(&edges, &to.join("edges"), &[("src", "large_utf8"), ("dst", "dictionary")], strings, &[]);
        rekeyed(&pairs, &to.join("pairs"), &[("src", "utf8_view"), ("dst", "utf8")], strings, &[]);
    }
    (dir.join("strings"), dir.join("ints"))
}

/// Each original string by its internal id (every string of the generated graph's ids).
fn keys_by_internal(n: i64) -> HashMap<i64, String> {
    (0..n).map(|id| (internal(&key(id)), key(id))).collect()
}

/// The `node_id` column of an output table by row as internal ids, and the strings read.
fn output_ids(batch: &RecordBatch, column: &str) -> (Vec<i64>, Vec<String>) {
    let column = batch.column_by_name(column).unwrap();
    match column.as_string_opt::<i32>() {
        Some(strings) => strings.iter().map(|s| (internal(s.unwrap()), s.unwrap().to_owned())).unzip(),
        None => (column.as_primitive::<Int64Type>().values().to_vec(), Vec::new()),
    }
}

/// A table's rows as (ids of `id_columns`, the other columns' values as text), sorted: the same
/// for the string and the int run once strings are mapped to internal ids. Also returns every
/// string read.
fn rows_by_id(batches: Vec<RecordBatch>, id_columns: &[&str]) -> (Vec<(Vec<i64>, String)>, Vec<String>) {
    let (mut rows, mut strings) = (Vec::new(), Vec::new());
    for batch in batches {
        let ids: Vec<(Vec<i64>, Vec<String>)> = id_columns.iter().map(|c| output_ids(&batch, c)).collect();
        let keep: Vec<usize> = (0..batch.num_columns())
            .filter(|&c| !id_columns.contains(&batch.schema().field(c).name().as_str()))
            .collect();
        let rest = batch.project(&keep).unwrap();
        let text = arrow_cast_rows(&rest);
        for (r, row) in text.into_iter().enumerate() {
            rows.push((ids.iter().map(|(i, _)| i[r]).collect(), row));
        }
        strings.extend(ids.into_iter().flat_map(|(_, s)| s));
    }
    rows.sort();
    (rows, strings)
}

/// Each row of `batch` as text, every value's bits included (floats by their bits).
fn arrow_cast_rows(batch: &RecordBatch) -> Vec<String> {
    (0..batch.num_rows())
        .map(|r| {
            batch
                .columns()
                .iter()
                .map(|c| match c.as_fixed_size_list_opt() {
                    Some(list) => {
                        let row = list.value(r);
                        let values = row.as_primitive::<Float32Type>().values().iter().map(|v| v.to_bits());
                        format!("{:?}", values.collect::<Vec<_>>())
                    }
                    None => format!("{:?}", c.slice(r, 1)),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// The record table's rows without `node_keys` (the columns' values), sorted; each row's
/// `node_keys` are checked to name its `node_ids` (by `keys`).
fn records_without_keys(dir: &Path, keys: &HashMap<i64, String>) -> Vec<String> {
    let mut rows = Vec::new();
    for batch in read_batches(dir) {
        if let Some(names) = batch.column_by_name("node_keys") {
            let (names, ids) = (names.as_list::<i32>(), batch.column_by_name("node_ids").unwrap().as_list::<i32>());
            for r in 0..batch.num_rows() {
                let (names, ids) = (names.value(r), ids.value(r));
                let (names, ids) = (names.as_string::<i32>(), ids.as_primitive::<Int64Type>());
                assert_eq!(names.len(), ids.len());
                for i in 0..ids.len() {
                    assert_eq!(names.value(i), keys[&ids.value(i)], "record {r}, node {i}");
                }
            }
        }
        let keep: Vec<usize> =
            (0..batch.num_columns()).filter(|&c| batch.schema().field(c).name() != "node_keys").collect();
        rows.extend(arrow_cast_rows(&batch.project(&keep).unwrap()));
    }
    rows.sort();
    rows
}

#[test]
fn a_graph_keyed_by_strings_trains_and_scores_as_its_internal_ids_and_every_output_names_the_strings() {
    let dir = scratch("string-ids");
    let (strings, ints) = graphs(&dir, false);
    let keys = keys_by_internal(300);
    let run = |data: &Path, name: &str, workers: &str| {
        let at = prefixed(&dir, name);
        let flatten = Job::flatten(data, at("flat")).key("task", "link").key("fanouts", vec![5, 5]);
        let train = Job::train(at("flat"), at("model"))
            .key("model", "sage")
            .key("hidden", 16)
            .key("embedding_dim", 8)
            .key("learned_embedding_dim", 12)
            .key("epochs", 3)
            .key("batch_size", 32)
            .key("seed", 7);
        let infer = Job::infer(data, at("model"), at("emb"))
            .key("pairs", data.join("pairs").to_str().unwrap())
            .key("pairs_output", at("pairs").to_str().unwrap());
        let out = run_ok(&flatten.and(train).and(infer).write(&dir, name), &["--workers", workers]);
        (out, at)
    };
    let (out, s) = run(&strings, "s", "2");
    let (_, i) = run(&ints, "i", "2");
    assert!(out.contains("learned:"), "{out}");
    // Records: the int graph's, bit for bit, plus each node's string beside its id.
    assert_eq!(records_without_keys(&s("flat"), &keys), records_without_keys(&i("flat"), &keys));
    let weights = |model: &Path| std::fs::read(model_file(model, ".bpk")).unwrap();
    assert!(weights(&s("model")) == weights(&i("model")), "the weights differ");
    // The learned table, the embeddings and the pair scores: the same rows under the strings.
    let tables = [("model/embeddings", &["node_id"][..]), ("emb", &["node_id"]), ("pairs", &["src", "dst"])];
    for (what, columns) in tables {
        let batches = |at: &dyn Fn(&str) -> PathBuf| match what.split_once('/') {
            Some((model, folder)) => batches_in(parquet_files_in(&at(model).join(folder))),
            None => read_batches(&at(what)),
        };
        let ((by_string, read), (by_int, _)) = (rows_by_id(batches(&s), columns), rows_by_id(batches(&i), columns));
        assert!(!by_string.is_empty(), "{what}: no rows");
        assert_eq!(by_string, by_int, "{what}");
        assert!(read.iter().all(|k| keys[&internal(k)] == *k), "{what}: a string that is no node's");
    }
    a_pair_naming_no_nodes_string_is_named(&dir, &strings, &s);
    // Every reader reads each table the string run committed (records with node_keys included),
    // and pandas the learned table's folder.
    assert_every_reader_reads_the_manifest(&[&s("flat"), &s("emb"), &s("pairs")]);
    readers_see_the_strings(&s);
}

/// A pair naming a string that is no node's: 65, naming it, its row and column.
fn a_pair_naming_no_nodes_string_is_named(dir: &Path, strings: &Path, s: &dyn Fn(&str) -> PathBuf) {
    let bad = dir.join("bad-pairs");
    std::fs::create_dir_all(&bad).unwrap();
    let pairs = RecordBatch::try_from_iter([
        ("src", Arc::new(StringArray::from(vec![key(1), key(2)])) as ArrayRef),
        ("dst", Arc::new(StringArray::from(vec![key(3), "sku-none".to_owned()]))),
    ])
    .unwrap();
    write_parquet(&bad.join("part-0.parquet"), &pairs);
    let infer = Job::infer(strings, s("model"), s("emb2"))
        .key("pairs", bad.to_str().unwrap())
        .key("pairs_output", s("pairs2").to_str().unwrap());
    assert_fails(&crate::common::run(&infer.write(dir, "bad-pairs"), &[]), 65, &["row 1", "dst", "\"sku-none\""]);
    assert!(!s("pairs2").join("_SUCCESS").exists() && !s("emb2").join("_SUCCESS").exists());
}

/// Readers see the strings: pandas as Python strings, DuckDB by glob.
fn readers_see_the_strings(s: &dyn Fn(&str) -> PathBuf) {
    if let Some(python) = python() {
        let script = "import sys, pandas, duckdb\n\
            emb, pairs = sys.argv[1], sys.argv[2]\n\
            df = pandas.read_parquet(emb)\n\
            learned = pandas.read_parquet(emb.replace('-emb', '-model') + '/embeddings')\n\
            print(all(isinstance(k, str) for k in df.node_id), df.node_id.is_unique, len(df))\n\
            print(learned.node_id.map(type).eq(str).all(), learned.node_id.is_unique)\n\
            print(duckdb.sql(f\"select count(*) from '{pairs}/*.parquet' where src like 'user_%'\").fetchall()[0][0])";
        let args = [s("emb"), s("pairs")].map(|p| p.to_str().unwrap().to_owned());
        let got = std::process::Command::new(python).args(["-c", script, &args[0], &args[1]]).output().unwrap();
        let text = String::from_utf8_lossy(&got.stdout).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"True True 300"), "{text} {}", String::from_utf8_lossy(&got.stderr));
        let users: usize = read_batches(&s("pairs"))
            .iter()
            .map(|b| {
                b.column_by_name("src")
                    .unwrap()
                    .as_string::<i32>()
                    .iter()
                    .flatten()
                    .filter(|k| k.starts_with("user_"))
                    .count()
            })
            .sum();
        assert!(users > 0);
        assert_eq!(lines.get(1), Some(&"True True"), "{text}");
        assert_eq!(lines.get(2).map(|l| l.to_string()), Some(users.to_string()));
    }
}

/// `dir/<name>-<what>` for each `what`.
fn prefixed(dir: &Path, name: &str) -> impl Fn(&str) -> PathBuf + use<> {
    let (dir, name) = (dir.to_path_buf(), name.to_owned());
    move |what| dir.join(format!("{name}-{what}"))
}

/// The Parquet files of a folder inside a committed directory (the model's `embeddings/`).
fn parquet_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_node_model_on_string_ids_scores_as_on_their_internal_ids() {
    let dir = scratch("string-ids-node");
    let (strings, ints) = graphs(&dir, true);
    let keys = keys_by_internal(300);
    let run = |data: &Path, name: &str, workers: &str| {
        let at = prefixed(&dir, name);
        let flatten = Job::flatten(data, at("flat")).key("fanouts", vec![4, 4]);
        let train = Job::train(at("flat"), at("model")).key("model", "gcn").key("epochs", 3).key("batch_size", 64);
        let infer = Job::infer(data, at("model"), at("scores"));
        run_ok(&flatten.and(train).and(infer).write(&dir, name), &["--workers", workers]);
        at
    };
    let (s, i) = (run(&strings, "s", "3"), run(&ints, "i", "3"));
    assert_eq!(records_without_keys(&s("flat"), &keys), records_without_keys(&i("flat"), &keys));
    let (by_string, read) = rows_by_id(read_batches(&s("scores")), &["node_id"]);
    assert_eq!(by_string, rows_by_id(read_batches(&i("scores")), &["node_id"]).0);
    assert_eq!(read.len(), 300);
}

#[test]
fn split_edges_writes_string_ids_of_every_encoding_as_one_schema_and_refuses_mixed_kinds() {
    let dir = scratch("string-ids-split");
    let edges = dir.join("edges");
    std::fs::create_dir_all(&edges).unwrap();
    let ids = Int64Array::from_iter_values(0..40);
    let dst = Int64Array::from_iter_values((0..40).map(|i| (i * 7 + 1) % 40));
    for (n, encoding) in ["utf8", "dictionary", "utf8_view"].iter().enumerate() {
        let batch = RecordBatch::try_from_iter([
            ("src", id_column(&ids, Some(encoding))),
            ("dst", id_column(&dst, Some(if n == 0 { "large_utf8" } else { encoding }))),
        ])
        .unwrap();
        write_parquet(&edges.join(format!("part-{n}.parquet")), &batch);
    }
    let out = dir.join("split");
    graphflat_ok(&["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap(), "--undirected"]);
    let written = read_batches(&out);
    assert!(
        written.iter().all(|b| b.schema().field_with_name("src").unwrap().data_type() == &arrow_schema::DataType::Utf8)
    );
    assert!(
        written.iter().all(|b| b.schema().field_with_name("dst").unwrap().data_type() == &arrow_schema::DataType::Utf8)
    );
    assert_eq!(written.iter().map(|b| b.num_rows()).sum::<usize>(), 120);
    assert_every_reader_reads_the_manifest(&[&out]);
    // A part of integers beside parts of strings: 65, naming the part and the column.
    let ints = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(vec![2]))),
    ])
    .unwrap();
    write_parquet(&edges.join("part-9.parquet"), &ints);
    let mixed = dir.join("mixed");
    let args = ["split-edges", "--edges", edges.to_str().unwrap(), "--out", mixed.to_str().unwrap()];
    assert_fails(&graphflat().args(args).output().unwrap(), 65, &["part-9.parquet", "src", "holds integers"]);
    assert!(!mixed.join("_SUCCESS").exists());
}

/// A node table keyed by `ids` (strings; `None` a null) with `edges` between them, in `dir`.
fn tiny(dir: &Path, ids: &[Option<&str>], edges: &[(&str, &str)]) -> PathBuf {
    let nodes = RecordBatch::try_from_iter([
        ("node_id", Arc::new(StringArray::from(ids.to_vec())) as ArrayRef),
        ("label", Arc::new(Int64Array::from(vec![1; ids.len()]))),
    ])
    .unwrap();
    let (src, dst): (Vec<&str>, Vec<&str>) = edges.iter().copied().unzip();
    let edges = RecordBatch::try_from_iter([
        ("src", Arc::new(StringArray::from(src)) as ArrayRef),
        ("dst", Arc::new(StringArray::from(dst))),
    ])
    .unwrap();
    for (name, batch) in [("nodes", nodes), ("edges", edges)] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        write_parquet(&dir.join(name).join("part-0.parquet"), &batch);
    }
    dir.to_path_buf()
}

/// A bad graph: its name, node ids, edges, and the words its error must hold.
type BadCase<'a> = (&'a str, Vec<Option<&'a str>>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

#[test]
fn bad_string_ids_exit_65_naming_file_row_and_column_and_commit_nothing() {
    let dir = scratch("string-ids-bad");
    let good = [Some("a"), Some("bb"), Some("c")];
    let cases: Vec<BadCase> = vec![
        (
            "null",
            vec![Some("a"), None, Some("c")],
            vec![("a", "c")],
            vec!["part-0.parquet", "row 1", "node_id", "null"],
        ),
        ("empty", vec![Some("a"), Some(""), Some("c")], vec![("a", "c")], vec!["row 1", "node_id", "empty string"]),
        (
            "twice",
            vec![Some("a"), Some("c"), Some("a")],
            vec![("a", "c")],
            vec!["row 2", "duplicate", "\"a\"", "row 0"],
        ),
        ("unknown", good.to_vec(), vec![("a", "c"), ("bb", "zz")], vec!["edges", "row 1", "dst", "\"zz\""]),
    ];
    for (name, ids, edges, words) in cases {
        let data = tiny(&dir.join(name), &ids, &edges);
        let out = dir.join(format!("{name}-flat"));
        let job = Job::flatten(&data, &out).key("fanouts", vec![2, 2]).write(&dir, name);
        assert_fails(&run(&job, &[]), 65, &words);
        assert!(!out.join("_SUCCESS").exists(), "{name}: committed");
    }
    // Edges of integers beside a node table of strings: the column is named.
    let data = tiny(&dir.join("kinds"), &good, &[("a", "c")]);
    let ints = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(vec![2]))),
    ])
    .unwrap();
    write_parquet(&data.join("edges/part-0.parquet"), &ints);
    let job = Job::flatten(&data, dir.join("kinds-flat")).key("fanouts", vec![2, 2]).write(&dir, "kinds");
    assert_fails(&run(&job, &[]), 65, &["edges", "src", "expected strings", "Int64"]);
}

/// Pairs of strings whose 54-bit hashes agree, found by `scripts/string-collisions.rs` (a
/// search over 3 billion strings).
pub(crate) const COLLIDED: [(&str, &str); 3] =
    [("user_72da993a", "user_91cc5a56"), ("user_becdda8", "user_2408f4c8"), ("user_d37fd2", "user_85bbf9c6")];

#[test]
fn strings_whose_hashes_collide_stay_distinct_nodes_with_their_own_features_and_edges() {
    let dir = scratch("string-ids-collide");
    for (a, b) in COLLIDED {
        let (x, y) = (StringHash::of(a), StringHash::of(b));
        assert!(x.h == y.h && x.g != y.g, "{a} and {b} must share h alone");
    }
    let (data, keys, edges) = collided_graph(&dir);
    let flat = dir.join("flat");
    let job = Job::flatten(&data, &flat).key("fanouts", vec![10, 10]).write(&dir, "collide");
    run_ok(&job, &["--workers", "3"]);
    let mut roots = records_of_collided_nodes(&flat, &keys, &edges);
    roots.sort();
    assert_eq!(roots.len(), keys.len(), "a record per node");
    let mut ids: Vec<i64> = roots.iter().map(|r| r.1).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), keys.len(), "distinct internal ids");
    // Of each pair, one keeps the hash and the other is numbered above every hash.
    let above = roots.iter().filter(|r| r.1 >= schemas::ids::COLLIDED_BASE).count();
    assert_eq!(above, COLLIDED.len());
}

/// Every collided string and six others as a graph under `dir/data`: node `i` has features
/// `[i, -i]`, edges make a ring over them all, both ways. Returns its place, the strings and
/// the edges by index.
fn collided_graph(dir: &Path) -> (PathBuf, Vec<String>, Vec<(usize, usize)>) {
    let mut keys: Vec<String> = COLLIDED.iter().flat_map(|(a, b)| [a.to_string(), b.to_string()]).collect();
    keys.extend((0..6).map(|i| format!("n{i}")));
    let n = keys.len();
    let edges: Vec<(usize, usize)> = (0..n).flat_map(|i| [(i, (i + 1) % n), ((i + 3) % n, i)]).collect();
    let nodes = RecordBatch::try_from_iter([
        ("node_id", Arc::new(StringArray::from_iter_values(&keys)) as ArrayRef),
        ("features", feature_rows(n)),
        ("label", Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i % 2)))),
    ])
    .unwrap();
    let edge_batch = RecordBatch::try_from_iter([
        ("src", Arc::new(StringArray::from_iter_values(edges.iter().map(|e| &keys[e.0]))) as ArrayRef),
        ("dst", Arc::new(StringArray::from_iter_values(edges.iter().map(|e| &keys[e.1])))),
    ])
    .unwrap();
    let data = dir.join("data");
    for (name, batch) in [("nodes", nodes), ("edges", edge_batch)] {
        std::fs::create_dir_all(data.join(name)).unwrap();
        write_parquet(&data.join(name).join("part-0.parquet"), &batch);
    }
    (data, keys, edges)
}

/// Each root's record holds its own features and its in-neighbors by string (a plain
/// reference); returns every root's string and internal id.
fn records_of_collided_nodes(flat: &Path, keys: &[String], edges: &[(usize, usize)]) -> Vec<(String, i64)> {
    let mut roots = Vec::new();
    for batch in read_batches(flat) {
        let (names, ids) = (
            batch.column_by_name("node_keys").unwrap().as_list::<i32>(),
            batch.column_by_name("node_ids").unwrap().as_list::<i32>(),
        );
        let (hops, features) = (
            batch.column_by_name("node_hops").unwrap().as_list::<i32>(),
            batch.column_by_name("node_features").unwrap().as_list::<i32>(),
        );
        for r in 0..batch.num_rows() {
            let (names, ids, hops) = (names.value(r), ids.value(r), hops.value(r));
            let (names, ids) = (names.as_string::<i32>(), ids.as_primitive::<Int64Type>());
            let root = keys.iter().position(|k| k == names.value(0)).unwrap();
            let first = features.value(r).as_fixed_size_list().value(0);
            assert_eq!(first.as_primitive::<Float32Type>().values().to_vec(), vec![root as f32, -(root as f32)]);
            let hop1: std::collections::BTreeSet<&str> = (0..names.len())
                .filter(|&i| hops.as_primitive::<arrow_array::types::UInt8Type>().value(i) == 1)
                .map(|i| names.value(i))
                .collect();
            let want: std::collections::BTreeSet<&str> =
                edges.iter().filter(|e| e.1 == root).map(|e| keys[e.0].as_str()).collect();
            assert_eq!(hop1, want, "in-neighbors of {}", keys[root]);
            roots.push((names.value(0).to_owned(), ids.value(0)));
        }
    }
    roots
}

/// `[i, -i]` for each node `i` of `n`, as `fixed_size_list<float32, 2>`.
fn feature_rows(n: usize) -> ArrayRef {
    let values = arrow_array::Float32Array::from_iter_values((0..n).flat_map(|i| [i as f32, -(i as f32)]));
    let item = Arc::new(Field::new("item", arrow_schema::DataType::Float32, false));
    Arc::new(arrow_array::FixedSizeListArray::try_new(item, 2, Arc::new(values), None).unwrap())
}

/// A typed graph keyed by strings: the generated user-item graph (`generate --hetero
/// --featureless user`) with every type's ids as the strings of [`key`] (so a user and an item
/// share each string), against the same graph keyed by the strings' internal ids. The records,
/// the R-GCN's weights, the users' learned rows and GraphInfer's scores are the int graph's,
/// bit for bit, under the strings and their types' names. Node tables of both kinds in one
/// graph are a usage error naming a type of each.
#[test]
fn a_typed_graph_keyed_by_strings_trains_and_scores_as_its_internal_ids() {
    let dir = scratch("string-ids-typed");
    typed_graphs(&dir, false);
    let keys = keys_by_internal(600);
    let run = |name: &str| {
        let (data, at) = (dir.join(name), prefixed(&dir, name));
        let flat = typed::flatten_typed(&dir, &data, &format!("{name}-flat"), "", &["--workers", "2"]);
        let text = format!(
            "{}[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 3\nbatch_size = 32\n\
             seed = 5\nlearned_embedding_dim = 6\nlearned_embedding_types = [\"user\"]\n\
             [infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\n",
            typed::graph_tables(&data),
            flat.display().to_string(),
            at("model").display().to_string(),
            at("model").display().to_string(),
            at("scores").display().to_string(),
        );
        run_ok(&write_job(&dir, &format!("{name}-job"), &text), &["--workers", "2"]);
        at
    };
    let (s, i) = (run("strings"), run("ints"));
    same_records_and_weights(&s, &i, &keys);
    for (what, batches) in [
        ("the learned table", [&s, &i].map(|at| batches_in(parquet_files_in(&at("model").join("embeddings"))))),
        ("the scores", [&s, &i].map(|at| read_batches(&at("scores")))),
    ] {
        let [by_string, by_int] = batches.map(|b| rows_by_id(b, &["node_id"]));
        assert!(!by_string.0.is_empty(), "{what}: no rows");
        assert_eq!(by_string.0, by_int.0, "{what}");
        assert!(by_string.1.iter().all(|k| keys[&internal(k)] == *k), "{what}: a string that is no node's");
        assert_eq!(by_int.1.len(), 0, "{what}: strings in the int run");
    }
    collided_users_keep_their_own_learned_rows(&dir);
    graphs_of_both_kinds_are_refused(&dir);
}

/// Users whose strings share a 54-bit hash (of each pair, one keeps it and the other is
/// numbered above every hash), joined by a relation of their own: each keeps its own learned
/// row, which GraphInfer finds by its string (a missing row would fail this job).
fn collided_users_keep_their_own_learned_rows(dir: &Path) {
    let collided = dir.join("collided");
    copy_graph(&dir.join("strings"), &collided, &[]);
    let users = batches_in([collided.join("nodes/user/part-0.parquet")]);
    let extra: Vec<&str> = COLLIDED.iter().flat_map(|&(a, b)| [a, b]).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(&extra)),
        Arc::new(Int64Array::from_iter_values((0..extra.len() as i64).map(|i| i % 2))),
        Arc::new(StringArray::from_iter_values(extra.iter().map(|_| "train"))),
    ];
    write_parquet(
        &collided.join("nodes/user/part-1.parquet"),
        &RecordBatch::try_new(users[0].schema(), columns).unwrap(),
    );
    let ring = |shift: usize| -> ArrayRef {
        let ends = (0..extra.len()).map(|i| extra[(i + shift) % extra.len()]).chain([key(0).leak() as &str; 2]);
        Arc::new(StringArray::from_iter_values(ends))
    };
    std::fs::create_dir_all(collided.join("edges/knows")).unwrap();
    let knows = RecordBatch::try_from_iter([("src", ring(0)), ("dst", ring(1))]).unwrap();
    write_parquet(&collided.join("edges/knows/part-0.parquet"), &knows);
    let at = prefixed(dir, "collided");
    let text = format!(
        "{}[graph.relations.knows]\nsrc = \"user\"\ndst = \"user\"\ntable = {:?}\nreverse = true\n\
         [flatten]\noutput = {:?}\ntarget_type = \"user\"\nhops = 2\nfanouts = [8, 8]\n\
         [train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 1\n\
         learned_embedding_dim = 6\nlearned_embedding_types = [\"user\"]\n\
         [infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\nmissing_embedding = \"error\"\n",
        typed::graph_tables(&collided),
        collided.join("edges/knows").display().to_string(),
        at("flat").display().to_string(),
        at("flat").display().to_string(),
        at("model").display().to_string(),
        at("model").display().to_string(),
        at("scores").display().to_string(),
    );
    let out = run_ok(&write_job(dir, "collided-job", &text), &["--workers", "3"]);
    assert!(out.contains("0 nodes without a learned row"), "{out}");
    let learned = batches_in(parquet_files_in(&at("model").join("embeddings")));
    let (rows, read) = rows_by_id(learned, &["node_id"]);
    let rows: Vec<&String> =
        read.iter().zip(&rows).filter(|(k, _)| extra.contains(&k.as_str())).map(|(_, r)| &r.1).collect();
    assert_eq!(rows.len(), extra.len(), "a row for each collided string");
}

/// Items keyed by integers beside users keyed by strings: one kind or the other.
fn graphs_of_both_kinds_are_refused(dir: &Path) {
    let mixed = dir.join("mixed");
    copy_graph(&dir.join("strings"), &mixed, &["nodes/item"]);
    copy_graph(&dir.join("ints"), &mixed, &["nodes/user", "nodes/shop", "edges"]);
    let text = format!(
        "{}[flatten]\noutput = {:?}\ntarget_type = \"user\"\n",
        typed::graph_tables(&mixed),
        dir.join("mixed-flat").display().to_string()
    );
    let out = crate::common::run(&write_job(dir, "mixed", &text), &[]);
    assert_fails(&out, 64, &["node type item is keyed by integers and node type shop by strings", "all string ids"]);
}

/// Copies the typed graph's tables in `from` to `to`, but those under `except`.
fn copy_graph(from: &Path, to: &Path, except: &[&str]) {
    let tables = ["user", "item", "shop"].map(|t| format!("nodes/{t}")).into_iter();
    let tables = tables.chain(["buys", "returns", "follows", "sells"].map(|r| format!("edges/{r}")));
    for table in tables.filter(|t| !except.iter().any(|e| t.starts_with(e))) {
        std::fs::create_dir_all(to.join(&table)).unwrap();
        std::fs::copy(from.join(&table).join("part-0.parquet"), to.join(&table).join("part-0.parquet")).unwrap();
    }
}

/// The generated user-item graph (`generate --hetero --featureless user`, 600 nodes) keyed by
/// the strings of [`key`] in `dir/strings` (every type's ids alike, so a user and an item share
/// each string), and by their internal ids in `dir/ints`; buys split for the link task (the
/// same split in both) when `split_buys`.
fn typed_graphs(dir: &Path, split_buys: bool) {
    let generated = dir.join("generated");
    let generate = ["generate", "--hetero", "--featureless", "user", "--out", generated.to_str().unwrap()];
    graphflat_ok(&[&generate[..], &["--nodes", "600", "--seed", "1"]].concat());
    if split_buys {
        let (buys, split) = (generated.join("edges/buys"), generated.join("buys-split"));
        let args = ["split-edges", "--edges", buys.to_str().unwrap(), "--out", split.to_str().unwrap()];
        graphflat_ok(&[&args[..], &["--valid", "0.1", "--test", "0.1", "--seed", "2"]].concat());
        std::fs::remove_dir_all(&buys).unwrap();
        std::fs::rename(&split, &buys).unwrap();
    }
    for (name, strings) in [("strings", true), ("ints", false)] {
        for t in ["user", "item", "shop"] {
            let (from, to) = (generated.join("nodes").join(t), dir.join(name).join("nodes").join(t));
            rekeyed(&read_batches(&from), &to, &[("node_id", "utf8")], strings, &[]);
        }
        for r in ["buys", "returns", "follows", "sells"] {
            let (from, to) = (generated.join("edges").join(r), dir.join(name).join("edges").join(r));
            rekeyed(&read_batches(&from), &to, &[("src", "large_utf8"), ("dst", "dictionary")], strings, &[]);
        }
    }
}

/// A typed link model over strings: buys' records (two drawn negatives), an R-GCN with learned
/// rows for the users, GraphInfer's embeddings and candidate (user, item) pairs' scores are
/// those of the same graph keyed by internal ids, bit for bit, under the strings; a pair naming
/// an item that is none is named by its string.
#[test]
fn a_typed_link_model_on_strings_scores_pairs_as_on_their_internal_ids() {
    let dir = scratch("string-ids-typed-link");
    typed_graphs(&dir, true);
    let keys = keys_by_internal(600);
    let run = |name: &str| {
        let (data, at) = (dir.join(name), prefixed(&dir, name));
        let text = format!(
            "{}[flatten]\noutput = {:?}\ntask = \"link\"\nlink_relation = \"buys\"\nnegatives = 2\nhops = 2\n\
             fanouts = [4, 3]\n\
             [train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nembedding_dim = 8\nepochs = 2\n\
             batch_size = 32\nseed = 5\nlearned_embedding_dim = 6\nlearned_embedding_types = [\"user\"]\n\
             [infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\npairs = {:?}\npairs_output = {:?}\n",
            typed::graph_tables(&data),
            at("flat").display().to_string(),
            at("flat").display().to_string(),
            at("model").display().to_string(),
            at("model").display().to_string(),
            at("emb").display().to_string(),
            link_pairs(&dir, name, None).display().to_string(),
            at("pairs").display().to_string(),
        );
        run_ok(&write_job(&dir, &format!("{name}-job"), &text), &["--workers", "2"]);
        at
    };
    let (s, i) = (run("strings"), run("ints"));
    same_records_and_weights(&s, &i, &keys);
    for (what, columns, batches) in [
        (
            "the learned table",
            &["node_id"][..],
            [&s, &i].map(|at| batches_in(parquet_files_in(&at("model").join("embeddings")))),
        ),
        ("the embeddings", &["node_id"], [&s, &i].map(|at| read_batches(&at("emb")))),
        ("the pair scores", &["src", "dst"], [&s, &i].map(|at| read_batches(&at("pairs")))),
    ] {
        let [by_string, by_int] = batches.map(|b| rows_by_id(b, columns));
        assert!(!by_string.0.is_empty(), "{what}: no rows");
        assert_eq!(by_string.0, by_int.0, "{what}");
        assert!(by_string.1.iter().all(|k| keys[&internal(k)] == *k), "{what}: a string that is no node's");
    }
    let bad = link_pairs(&dir, "bad", Some(&key(400)));
    an_item_that_is_none_is_named(&dir, &s, &bad);
}

/// 40 candidate (user, item) pairs under `dir/name/pairs`, keyed by strings but for the
/// "ints" graph; with `bad_dst`, a part whose second pair's item is that string.
fn link_pairs(dir: &Path, name: &str, bad_dst: Option<&str>) -> PathBuf {
    let (src, dst): (Vec<i64>, Vec<i64>) = (0..40).map(|i| (i * 7 % 360, i * 5 % 180)).unzip();
    let batch = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(src)) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(dst))),
    ])
    .unwrap();
    let to = dir.join(name).join("pairs");
    rekeyed(&[batch], &to, &[("src", "utf8"), ("dst", "utf8_view")], name != "ints", &[]);
    if let Some(bad_dst) = bad_dst {
        let bad = RecordBatch::try_from_iter([
            ("src", Arc::new(StringArray::from(vec![key(1), key(2)])) as ArrayRef),
            ("dst", Arc::new(StringArray::from(vec![key(3), bad_dst.to_owned()]))),
        ])
        .unwrap();
        write_parquet(&to.join("part-0.parquet"), &bad);
    }
    to
}

/// A pair whose item is none (a user's string, in `bad`): named by its string, its type, row
/// and column.
fn an_item_that_is_none_is_named(dir: &Path, s: &dyn Fn(&str) -> PathBuf, bad: &Path) {
    let text = format!(
        "{}[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\npairs = {:?}\npairs_output = {:?}\n",
        typed::graph_tables(&dir.join("strings")),
        s("model").display().to_string(),
        s("emb2").display().to_string(),
        bad.display().to_string(),
        s("pairs2").display().to_string(),
    );
    let out = crate::common::run(&write_job(dir, "bad-job", &text), &[]);
    assert_fails(&out, 65, &["row 1", "dst", &format!("pair names unknown item {:?}", key(400))]);
    assert!(!s("pairs2").join("_SUCCESS").exists());
}

/// The records under `s("flat")` and `i("flat")` (a string run's and an int run's) are the same
/// but for `node_keys`, which name the nodes by `keys`; so are the models' weights, bit for bit.
fn same_records_and_weights(s: &impl Fn(&str) -> PathBuf, i: &impl Fn(&str) -> PathBuf, keys: &HashMap<i64, String>) {
    assert_eq!(records_without_keys(&s("flat"), keys), records_without_keys(&i("flat"), keys));
    let weights = |model: &Path| std::fs::read(model_file(model, ".bpk")).unwrap();
    assert!(weights(&s("model")) == weights(&i("model")), "the weights differ");
}
