//! The refresh of a node job's records (`incremental = true`, `docs/refresh.md`): over a
//! series of days, each a random change of the graph (features, labels and splits changed,
//! edges added and removed, nodes added and removed, a hub gaining hundreds of in-edges, no
//! change at all), the refreshed output holds exactly the records a full run over that day's
//! tables writes, bit for bit, on 1, 2 and 3 workers and 2 processes, while it computes only
//! the affected ones and carries untouched parts over; every reader reads it; a refresh that
//! cannot start from the output runs in full and says why; a typed graph's refresh is exact
//! too; a refresh killed at any moment leaves a version that reads whole, and the next refresh
//! is exact again. Link records: `refresh_links.rs`.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::common::*;

/// A node row: (id, features, label, split).
pub(crate) type Node = (i64, Vec<f32>, Option<i64>, Option<String>);

/// A day's change of the graph, named.
pub(crate) type Change<'a> = (&'a str, &'a dyn Fn(&mut Day, &mut Rng));

/// A graph as plain rows, to change between days.
#[derive(Clone)]
pub(crate) struct Day {
    pub(crate) nodes: Vec<Node>,
    /// (src, dst, weight)
    pub(crate) edges: Vec<(i64, i64, f32)>,
}

/// A small deterministic generator (xorshift), so that a failing day can be replayed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

impl Day {
    pub(crate) fn read(data: &Path) -> Day {
        let mut nodes = Vec::new();
        for b in read_batches(&data.join("nodes")) {
            let ids = b.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
            let features = b.column_by_name("features").unwrap().as_list::<i32>();
            let labels = b.column_by_name("label").unwrap().as_primitive::<Int64Type>();
            let splits = b.column_by_name("split").unwrap().as_string::<i32>();
            for r in 0..b.num_rows() {
                let f = features.value(r).as_primitive::<Float32Type>().values().to_vec();
                let split = splits.is_valid(r).then(|| splits.value(r).to_owned());
                nodes.push((ids.value(r), f, labels.is_valid(r).then(|| labels.value(r)), split));
            }
        }
        let mut edges = Vec::new();
        for b in read_batches(&data.join("edges")) {
            let (s, d) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
            let w = b.column_by_name("weight").unwrap().as_primitive::<Float32Type>();
            edges.extend((0..b.num_rows()).map(|r| (s.value(r), d.value(r), w.value(r))));
        }
        Day { nodes, edges }
    }

    /// The day's tables in `data/nodes` and `data/edges`, one file each.
    pub(crate) fn write(&self, data: &Path) {
        let _ = std::fs::remove_dir_all(data);
        write_parquet(&data.join("nodes/part-0.parquet"), &nodes_batch(&self.nodes));
        write_parquet(&data.join("edges/part-0.parquet"), &edges_batch(&self.edges));
    }

    fn some_node(&self, rng: &mut Rng) -> i64 {
        self.nodes[rng.below(self.nodes.len())].0
    }

    /// Features of `n` nodes changed (one value by one ulp: every bit counts), a label and a
    /// split changed.
    pub(crate) fn change_nodes(&mut self, rng: &mut Rng, n: usize) {
        for _ in 0..n {
            let i = rng.below(self.nodes.len());
            let v = &mut self.nodes[i].1[0];
            *v = f32::from_bits(v.to_bits() + 1);
        }
        let i = rng.below(self.nodes.len());
        self.nodes[i].2 = self.nodes[i].2.map(|l| (l + 1) % 7);
        let i = rng.below(self.nodes.len());
        self.nodes[i].3 = Some(if self.nodes[i].3.as_deref() == Some("train") { "test" } else { "train" }.into());
    }

    /// `n` edges removed and `n` added between existing nodes.
    pub(crate) fn change_edges(&mut self, rng: &mut Rng, n: usize) {
        for _ in 0..n {
            let i = rng.below(self.edges.len());
            self.edges.swap_remove(i);
            let (s, d) = (self.some_node(rng), self.some_node(rng));
            self.edges.push((s, d, 0.5 + (rng.below(100) as f32) / 100.0));
        }
    }

    /// `n` nodes removed with their edges, and `n` new ones added with an in-edge and an
    /// out-edge each.
    pub(crate) fn change_node_set(&mut self, rng: &mut Rng, n: usize) {
        let next = self.nodes.iter().map(|n| n.0).max().unwrap() + 1;
        for k in 0..n {
            let gone = self.nodes.swap_remove(rng.below(self.nodes.len())).0;
            self.edges.retain(|e| e.0 != gone && e.1 != gone);
            let id = next + k as i64;
            let (a, b) = (self.some_node(rng), self.some_node(rng));
            self.nodes.push((id, vec![0.25; self.nodes[0].1.len()], Some(1), Some("train".into())));
            self.edges.extend([(a, id, 1.0), (id, b, 1.0)]);
        }
    }

    /// One node gains `n` in-edges.
    pub(crate) fn grow_hub(&mut self, rng: &mut Rng, n: usize) {
        let hub = self.some_node(rng);
        for _ in 0..n {
            let src = self.some_node(rng);
            self.edges.push((src, hub, 1.0));
        }
    }
}

/// Node rows as the node table's columns.
pub(crate) fn nodes_batch(nodes: &[Node]) -> RecordBatch {
    let mut features = ListBuilder::new(Float32Builder::new()).with_field(Field::new("item", DataType::Float32, false));
    for (_, f, _, _) in nodes {
        features.values().append_slice(f);
        features.append(true);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("node_id", Arc::new(Int64Array::from_iter_values(nodes.iter().map(|n| n.0)))),
        ("features", Arc::new(features.finish())),
        ("label", Arc::new(nodes.iter().map(|n| n.2).collect::<Int64Array>())),
        ("split", Arc::new(nodes.iter().map(|n| n.3.clone()).collect::<StringArray>())),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// `(src, dst, weight)` rows as the edge table's columns.
pub(crate) fn edges_batch(edges: &[(i64, i64, f32)]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("src", DataType::Int64, false),
        Field::new("dst", DataType::Int64, false),
        Field::new("weight", DataType::Float32, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.0))),
        Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.1))),
        Arc::new(Float32Array::from_iter_values(edges.iter().map(|e| e.2))),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// The days of the tests: each a change of the graph.
pub(crate) fn changes() -> [Change<'static>; 6] {
    [
        ("no change", &|_, _| {}),
        ("features, a label and a split", &|d, r| d.change_nodes(r, 6)),
        ("edges removed and added", &|d, r| d.change_edges(r, 8)),
        ("nodes removed and added", &|d, r| d.change_node_set(r, 3)),
        ("a hub gains 300 in-edges", &|d, r| d.grow_hub(r, 300)),
        ("everything at once", &|d, r| {
            d.change_nodes(r, 3);
            d.change_edges(r, 3);
            d.change_node_set(r, 2);
        }),
    ]
}

/// The flatten job of the test over `data` into `output`.
pub(crate) fn job(data: &Path, output: &Path, incremental: bool) -> Job {
    Job::flatten(data, output)
        .key("hops", 2)
        .key("fanouts", vec![4, 3])
        .key("seed", 5)
        .key("hub_threshold", 40)
        .key("batch_size", 97)
        .key("part_size_mb", 1)
        .key("incremental", incremental)
        .key("overwrite", true)
}

/// The summary's `refresh:` line.
pub(crate) fn refresh_line(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.trim_start().starts_with("refresh:"));
    let line = line.unwrap_or_else(|| panic!("no refresh line:\n{stdout}"));
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asserts that `stdout`'s run refreshed incrementally, with no row affected exactly when
/// `unchanged`, and at most a quarter of them.
pub(crate) fn assert_incremental(stdout: &str, day: &str, unchanged: bool) {
    let line = refresh_line(stdout);
    assert!(line.starts_with("refresh: incremental over run"), "{day}: {line}");
    let (hit, all) = affected(&line);
    assert_eq!(hit == 0, unchanged, "{day}: {line}");
    assert!(hit * 4 <= all, "{day}: {line}");
}

/// The days of GraphInfer's refresh tests over a few thousand nodes.
pub(crate) fn infer_changes() -> [Change<'static>; 5] {
    [
        ("no change", &|_, _| {}),
        ("features, a label and a split", &|d, r| d.change_nodes(r, 5)),
        ("edges removed and added", &|d, r| d.change_edges(r, 6)),
        ("nodes removed and added", &|d, r| d.change_node_set(r, 2)),
        ("a hub gains 300 in-edges", &|d, r| d.grow_hub(r, 300)),
    ]
}

/// The affected records the `refresh:` line counts, and the records in all.
pub(crate) fn affected(line: &str) -> (u64, u64) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "of").expect("an 'of' in the line");
    (words[at - 1].parse().unwrap(), words[at + 1].parse().unwrap())
}

/// Asserts that `refreshed` holds the records of a full run over `data` (written to `full`).
pub(crate) fn assert_exact(dir: &Path, data: &Path, refreshed: &Path, full: &Path, day: &str) {
    run_ok(&job(data, full, false).write(dir, "full"), &[]);
    let (got, want) = (read_listed_records(refreshed), read_records(full));
    assert_eq!(got.len(), want.len(), "{day}: record count");
    assert!(got == want, "{day}: the refreshed records differ from a full run's");
    let manifest = manifest(refreshed);
    // No part of no rows is carried or written again; the rounds' first worker writes one
    // when it computed no record, at most.
    let empty = manifest["parts"].as_array().unwrap().iter().filter(|p| p["rows"].as_u64() == Some(0)).count();
    assert!(empty <= 1, "{day}: {empty} parts of no rows");
    let listed = manifest["parts"].as_array().unwrap().iter().map(|p| refreshed.join(p["name"].as_str().unwrap()));
    assert_eq!(sorted_rows(&batches_in(listed)), sorted_rows(&read_batches(full)), "{day}: rows as stored");
}

#[test]
fn a_refresh_writes_what_a_full_run_writes_day_after_day() {
    let dir = scratch("refresh");
    generate(&dir.join("g"), 1_500, 6, 5, 7);
    let mut day = Day::read(&dir.join("g"));
    let (data, out, full) = (dir.join("data"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    let first = run_ok(&job(&data, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");
    assert!(dir.join(".flat.graphflat-state/_SUCCESS").exists(), "the digests are kept beside the output");

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut changes = changes().to_vec();
    changes.push(("a third of the edges replaced", &|d, r| d.change_edges(r, 3_000)));
    for (i, (name, change)) in changes.iter().enumerate() {
        change(&mut day, &mut rng);
        day.write(&data);
        let workers = ["1", "2", "3"][i % 3];
        let stdout = run_ok(&job(&data, &out, true).write(&dir, "day"), &["--workers", workers]);
        let line = refresh_line(&stdout);
        if i == changes.len() - 1 {
            assert!(line.contains("a full run is cheaper"), "{name}: {line}");
        } else {
            assert!(line.starts_with("refresh: incremental over run"), "{name}: {line}");
            let (hit, all) = affected(&line);
            assert!(hit * 4 <= all, "{name}: {line}");
            match i {
                0 => assert!(hit == 0 && stdout.contains("0 written again"), "{name}: nothing is rewritten:\n{stdout}"),
                _ => assert!(hit > 0, "{name}: {line}"),
            }
        }
        assert_exact(&dir, &data, &out, &full, name);
    }
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn a_refresh_on_two_processes_is_exact() {
    let dir = scratch("refresh-procs");
    generate(&dir.join("g"), 1_200, 6, 4, 9);
    let mut day = Day::read(&dir.join("g"));
    let (data, out, full) = (dir.join("data"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    run_ok(&job(&data, &out, true).write(&dir, "day0"), &[]);
    let mut rng = Rng(77);
    day.change_edges(&mut rng, 5);
    day.change_nodes(&mut rng, 4);
    day.write(&data);
    let procs = Job::loopback(2).and(job(&data, &out, true));
    run_two_processes(&procs.write(&dir, "procs"), &dir);
    assert_exact(&dir, &data, &out, &full, "two processes");
}

/// The tables of the generated typed graph (`crate::common::typed`), each a folder.
pub(crate) const TYPED_TABLES: [&str; 7] =
    ["nodes/user", "nodes/item", "nodes/shop", "edges/buys", "edges/returns", "edges/follows", "edges/sells"];

/// A day of the typed graph: its name, and the rows `i` of table `t` it drops (`drop(t, i)`).
pub(crate) type TypedDay<'a> = (&'a str, &'a dyn Fn(&str, usize) -> bool);

/// The typed graph of `source` into `data`, each table one file, without the rows `i` of
/// table `t` for which `drop(t, i)`.
pub(crate) fn write_typed_day(source: &Path, data: &Path, drop: &dyn Fn(&str, usize) -> bool) {
    for table in TYPED_TABLES {
        let batches = read_batches(&source.join(table));
        let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        let keep: arrow_array::BooleanArray = (0..all.num_rows()).map(|i| Some(!drop(table, i))).collect();
        let _ = std::fs::remove_dir_all(data.join(table));
        let rows = arrow_select::filter::filter_record_batch(&all, &keep).unwrap();
        write_parquet(&data.join(table).join("part-0.parquet"), &rows);
    }
}

/// A typed graph's records and scores (an R-GCN's, every type's rows, hubs split) refreshed
/// day after day equal a full run's.
#[test]
fn a_typed_refresh_writes_what_a_full_run_writes() {
    let dir = scratch("refresh-typed");
    let (source, data, out, full) = (dir.join("source"), dir.join("data"), dir.join("flat"), dir.join("full"));
    graphflat_ok(&["generate", "--hetero", "--out", source.to_str().unwrap(), "--nodes", "6000", "--seed", "3"]);
    let at = |p: &Path| p.display().to_string();
    let job = |section: &str, keys: String, incremental: bool, name: &str| {
        let text = format!(
            "{}[{section}]\n{keys}target_type = \"user\"\nincremental = {incremental}\noverwrite = true\n\
             part_size_mb = 1\nbatch_size = 31\n",
            crate::common::typed::graph_tables(&data),
        );
        write_job(&dir, name, &text)
    };
    let flatten = |output: &Path, incremental: bool, name: &str| {
        job("flatten", format!("output = {:?}\n", at(output)), incremental, name)
    };
    let (model, scores, full_scores) = (dir.join("model"), dir.join("scores"), dir.join("full-scores"));
    let infer = |output: &Path, incremental: bool, name: &str| {
        let keys = format!("model = {:?}\noutput = {:?}\nhub_threshold = 6\n", at(&model), at(output));
        job("infer", keys, incremental, name)
    };
    write_typed_day(&source, &data, &|_, _| false);
    let first = run_ok(&flatten(&out, true, "day0"), &[]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");
    let train = format!(
        "[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 1\n",
        at(&out),
        at(&model)
    );
    run_ok(&write_job(&dir, "train", &train), &[]);
    run_ok(&infer(&scores, true, "infer0"), &[]);
    // Each day's edges, dropped from the generated ones: users' own, items' (which users reach
    // through the reversed buys), and shops' (two hops away).
    let days: [TypedDay; 4] = [
        ("no change", &|_, _| false),
        ("follows", &|t, i| t == "edges/follows" && i == 3),
        ("buys", &|t, i| t == "edges/buys" && i == 5),
        ("sells", &|t, i| t == "edges/sells" && i == 1),
    ];
    for (i, (name, drop)) in days.iter().enumerate() {
        write_typed_day(&source, &data, drop);
        let workers = ["--workers", ["1", "2"][i % 2]];
        for (stdout, what) in [
            (run_ok(&flatten(&out, true, "day"), &workers), "records"),
            (run_ok(&infer(&scores, true, "infer"), &workers), "scores"),
        ] {
            let line = refresh_line(&stdout);
            assert!(line.starts_with("refresh: incremental over run"), "{name}, {what}: {line}");
            let (hit, _) = affected(&line);
            assert_eq!(hit == 0, i == 0, "{name}, {what}: {line}");
        }
        run_ok(&flatten(&full, false, "full"), &[]);
        let (got, want) = (read_listed_records(&out), read_records(&full));
        assert_eq!(got.len(), want.len(), "{name}: record count");
        assert!(got == want, "{name}: the refreshed records differ from a full run's");
        run_ok(&infer(&full_scores, false, "full-infer"), &[]);
        assert_eq!(listed_rows(&scores), sorted_rows(&read_batches(&full_scores)), "{name}: scores");
    }
}

#[test]
fn a_refresh_that_cannot_start_from_the_output_runs_in_full_and_says_why() {
    let dir = scratch("refresh-full");
    generate(&dir.join("g"), 600, 5, 3, 4);
    let (data, out) = (dir.join("g"), dir.join("flat"));
    let incremental = |name: &str, edit: &dyn Fn(Job) -> Job| {
        let stdout = run_ok(&edit(job(&data, &out, true)).write(&dir, name), &[]);
        refresh_line(&stdout)
    };
    run_ok(&job(&data, &out, false).write(&dir, "plain"), &[]);
    assert!(incremental("no-digests", &|j| j).contains("no digests of run"));
    assert!(incremental("fanouts", &|j| j.key("fanouts", vec![4, 2])).contains("another `fanouts`"));
    assert!(incremental("same", &|j| j.key("fanouts", vec![4, 2])).starts_with("refresh: incremental"));
    // Digests of another run than the output's (a copy of yesterday's).
    let state = dir.join(".flat.graphflat-state");
    let old = dir.join("old-state");
    std::fs::rename(&state, &old).unwrap();
    run_ok(&job(&data, &out, true).key("fanouts", vec![4, 2]).write(&dir, "again"), &[]);
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::rename(&old, &state).unwrap();
    let line = incremental("stale", &|j| j.key("fanouts", vec![4, 2]));
    assert!(line.contains("the digests beside the output are run"), "{line}");
    // Digests that fail their checks.
    let part = parquet_files(&state).into_iter().next().unwrap();
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    let line = incremental("broken", &|j| j.key("fanouts", vec![4, 2]));
    assert!(line.contains("cannot be read"), "{line}");
    // A part of the output changed after its commit (its first column's bytes): read to be
    // carried, it fails its checksum, and the run is a full one rather than a failed one.
    let part = parquet_files(&out).into_iter().next().unwrap();
    let mut bytes = std::fs::read(&part).unwrap();
    bytes[4..64].iter_mut().for_each(|b| *b ^= 0xff);
    std::fs::write(&part, &bytes).unwrap();
    let line = incremental("altered", &|j| j.key("fanouts", vec![4, 2]));
    assert!(line.contains("cannot be read") && line.contains("after its commit"), "{line}");
    assert!(incremental("after", &|j| j.key("fanouts", vec![4, 2])).starts_with("refresh: incremental"));
    // Digests' folder that a refresh may not replace (its manifest deleted, so that its
    // `_SUCCESS` reads as another tool's; a file in its place): refused, with the advice to
    // delete it (not to choose another output: the place is named after the output), and
    // once deleted the next run goes in full.
    let refused = |name: &str| {
        let ended = run(&job(&data, &out, true).key("fanouts", vec![4, 2]).write(&dir, name), &[]);
        assert_eq!(ended.status.code(), Some(73), "{name}: {}", text(&ended));
        let said = text(&ended);
        assert!(said.contains("delete it") && !said.contains("choose another output directory"), "{name}: {said}");
    };
    std::fs::remove_file(state.join("_manifest.parquet")).unwrap();
    refused("no-manifest");
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::write(&state, b"not a folder").unwrap();
    refused("a-file");
    std::fs::remove_file(&state).unwrap();
    assert!(incremental("deleted", &|j| j.key("fanouts", vec![4, 2])).contains("no digests of run"));
    assert!(incremental("after", &|j| j.key("fanouts", vec![4, 2])).starts_with("refresh: incremental"));
    // A part grown after its commit (bytes appended: it still reads up to its listed size) is
    // not carried on, and a part gone leaves a version that does not read: both run in full,
    // and every reader reads the version that follows.
    let grown = |part: &std::path::Path| {
        let mut bytes = std::fs::read(part).unwrap();
        bytes.extend([0; 10]);
        std::fs::write(part, &bytes).unwrap();
    };
    let gone = |part: &std::path::Path| std::fs::remove_file(part).unwrap();
    for (name, damage) in [("grown", &grown as &dyn Fn(&std::path::Path)), ("gone", &gone)] {
        for part in parquet_files(&out).iter().take(2) {
            damage(part);
        }
        let line = incremental(name, &|j| j.key("fanouts", vec![4, 2]));
        assert!(line.contains("cannot be read") && line.contains("after its commit"), "{name}: {line}");
        assert_every_reader_reads_the_manifest(&[&out]);
        assert!(incremental("after", &|j| j.key("fanouts", vec![4, 2])).starts_with("refresh: incremental"));
    }
}

#[test]
fn a_refresh_killed_at_any_moment_leaves_a_whole_version_and_the_next_is_exact() {
    let dir = scratch("refresh-kill");
    // Large enough that a refresh takes a few hundred milliseconds, so that the kills land in
    // each of its phases.
    generate(&dir.join("g"), 20_000, 6, 8, 11);
    let mut day = Day::read(&dir.join("g"));
    let (data, out, full) = (dir.join("data"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    run_ok(&job(&data, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    let before = read_records(&out);
    let mut rng = Rng(5);
    day.change_edges(&mut rng, 60);
    day.write(&data);
    run_ok(&job(&data, &full, false).write(&dir, "full"), &[]);
    let after = read_records(&full);
    let refresh = job(&data, &out, true).write(&dir, "day1");
    for delay_ms in [15, 40, 70, 100, 140, 200, 300] {
        killed_after(&refresh, delay_ms);
        let now = read_listed_records(&out);
        assert!(now == before || now == after, "killed after {delay_ms} ms: neither day's version");
    }
    let stdout = run_ok(&refresh, &["--workers", "2"]);
    assert!(refresh_line(&stdout).starts_with("refresh:"), "{stdout}");
    assert_exact(&dir, &data, &out, &full, "after the kills");

    // Stopped inside the switch of a refresh that carries parts (held there by the test hook):
    // SIGTERM finishes the commit; kill -9 leaves one day's version whole; either way the next
    // refresh is exact.
    for (i, signal) in ["TERM", "KILL"].into_iter().enumerate() {
        let before = read_listed_records(&out);
        day.change_edges(&mut rng, 2);
        day.write(&data);
        run_ok(&job(&data, &full, false).write(&dir, "full"), &[]);
        let after = read_records(&full);
        let ended = stopped_inside_its_switch(&refresh, &out, signal);
        let now = read_listed_records(&out);
        match signal {
            "TERM" => {
                assert_eq!(ended.status.code(), Some(0), "{}", text(&ended));
                assert!(now == after, "stopped inside the switch: the refresh's version");
            }
            _ => assert!(now == before || now == after, "killed inside the switch: neither day's version"),
        }
        let stdout = run_ok(&refresh, &["--workers", "2"]);
        assert!(refresh_line(&stdout).starts_with("refresh: incremental"), "{i}: {stdout}");
        assert_exact(&dir, &data, &out, &full, &format!("after a {signal} inside the switch"));
    }
}

/// Runs `job` on 2 workers with every switch held for 3 s (`tables::switch::PAUSE_VAR`), sends
/// it `signal` once the switch of `out` holds its new version, and returns what it printed.
pub(crate) fn stopped_inside_its_switch(job: &Path, out: &Path, signal: &str) -> std::process::Output {
    // A run killed before left its version beside the output (the next run removes it): not
    // the switch this one waits for.
    let stale = switch_versions(out);
    let mut child = graphflat()
        .args(["run", job.to_str().unwrap(), "--workers", "2"])
        .env(::tables::switch::PAUSE_VAR, "3000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_switch(out, &mut child, &stale);
    std::process::Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `job` on 2 workers and kills it (SIGKILL) after `delay_ms`; returns whether the kill
/// ended it (rather than finding it ended).
pub(crate) fn killed_after(job: &Path, delay_ms: u64) -> bool {
    let mut child = graphflat()
        .args(["run", job.to_str().unwrap(), "--workers", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(delay_ms));
    let _ = child.kill();
    use std::os::unix::process::ExitStatusExt;
    child.wait().unwrap().signal() == Some(9)
}

/// The versions beside `out` that a switch builds (`.<out>.graphflat-<run>` holding a
/// manifest); the digests' own folder is not one.
fn switch_versions(out: &Path) -> Vec<std::path::PathBuf> {
    let name = format!(".{}.graphflat-", out.file_name().unwrap().to_string_lossy());
    let entries = std::fs::read_dir(out.parent().unwrap()).unwrap().map(|e| e.unwrap().path());
    entries
        .filter(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            file.starts_with(&name) && !file.ends_with("-state") && path.join("_manifest.parquet").exists()
        })
        .collect()
}

/// Waits until a switch of `out` holds its new version beside it, paused before the exchange
/// (`tables::switch::PAUSE_VAR`): a version not among `stale`.
fn wait_for_a_switch(out: &Path, child: &mut std::process::Child, stale: &[std::path::PathBuf]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if switch_versions(out).iter().any(|v| !stale.contains(v)) {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "the refresh ended before its switch");
        assert!(std::time::Instant::now() < deadline, "no switch began");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The infer job of the test: `model` over `data` into `output`, hubs split past 5 in-edges.
pub(crate) fn infer_job(data: &Path, model: &Path, output: &Path, incremental: bool) -> Job {
    Job::infer(data, model, output)
        .key("hub_threshold", 5)
        .key("batch_size", 64)
        .key("part_size_mb", 1)
        .key("incremental", incremental)
        .key("overwrite", true)
}

/// The rows of the parts `dir`'s manifest lists, each as text, sorted (floats printed to
/// their last bit).
pub(crate) fn listed_rows(dir: &Path) -> Vec<String> {
    let manifest = manifest(dir);
    let listed = manifest["parts"].as_array().unwrap().iter().map(|p| dir.join(p["name"].as_str().unwrap()));
    sorted_rows(&batches_in(listed))
}

#[test]
fn an_infer_refresh_writes_what_a_full_run_writes_day_after_day() {
    let dir = scratch("refresh-infer");
    generate(&dir.join("g"), 1_500, 6, 5, 7);
    let mut day = Day::read(&dir.join("g"));
    let (data, model, out, full) = (dir.join("data"), dir.join("model"), dir.join("scores"), dir.join("full"));
    day.write(&data);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![4, 3]).key("seed", 5));
    let train = |name: &str| {
        let job =
            Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).key("model", "sage").key("overwrite", true);
        run_ok(&job.write(&dir, name), &[]);
    };
    train("train");
    let first = run_ok(&infer_job(&data, &model, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");

    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let changes: [Change; 6] = [
        ("no change", &|_, _| {}),
        ("features, a label and a split", &|d, r| d.change_nodes(r, 5)),
        ("edges removed and added", &|d, r| d.change_edges(r, 6)),
        ("nodes removed and added", &|d, r| d.change_node_set(r, 3)),
        ("a hub gains 300 in-edges", &|d, r| d.grow_hub(r, 300)),
        ("a third of the edges replaced", &|d, r| d.change_edges(r, 3_000)),
    ];
    for (i, (name, change)) in changes.iter().enumerate() {
        change(&mut day, &mut rng);
        day.write(&data);
        let workers = ["1", "2", "3"][i % 3];
        let stdout = run_ok(&infer_job(&data, &model, &out, true).write(&dir, "day"), &["--workers", workers]);
        if i == changes.len() - 1 {
            assert!(refresh_line(&stdout).contains("a full run is cheaper"), "{name}: {stdout}");
        } else {
            assert_incremental(&stdout, name, i == 0);
        }
        run_ok(&infer_job(&data, &model, &full, false).write(&dir, "full"), &[]);
        assert_eq!(listed_rows(&out), sorted_rows(&read_batches(&full)), "{name}: the rows differ from a full run's");
    }
    assert_every_reader_reads_the_manifest(&[&out]);

    // Another training of the model: every row is computed again.
    train("train-again");
    let stdout = run_ok(&infer_job(&data, &model, &out, true).write(&dir, "retrained"), &[]);
    assert!(refresh_line(&stdout).contains("schema or metadata changed"), "{stdout}");
    run_ok(&infer_job(&data, &model, &full, false).write(&dir, "full"), &[]);
    assert_eq!(listed_rows(&out), sorted_rows(&read_batches(&full)), "after retraining");
}
