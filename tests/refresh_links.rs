//! The refresh of link records (`task = "link"` with `incremental = true`, `docs/refresh.md`):
//! over a series of days, each a random change of the graph (features, edges added and removed,
//! supervision edges given another split, held-out edges moved between valid and test (which
//! changes no node, only the tasks), nodes removed and added, a hub gaining in-edges, no change
//! at all), the refreshed output holds exactly the link records a full run over that
//! day's tables writes, bit for bit, on 1, 2 and 3 workers and 2 processes, with
//! `disjoint_train`, while it computes only the dirty sources' records and carries the rest;
//! from delta tables too; and a refresh killed at any moment leaves a whole version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::common::*;
use crate::refresh::{
    Day, Node, Rng, TypedDay, affected, edges_batch, killed_after, listed_rows, nodes_batch, refresh_line,
    stopped_inside_its_switch, write_typed_day,
};

/// A day of a link job's graph: the graph, and the supervision edges whose split is not the
/// rule's.
#[derive(Clone)]
struct LinkDay {
    day: Day,
    splits: BTreeMap<(i64, i64), &'static str>,
}

/// The split of the edge a -> b by a rule of this test's own: about 60% train, 10% valid,
/// 10% test, 20% none (not a supervision edge).
fn rule(a: i64, b: i64) -> Option<&'static str> {
    match (a * 31 + b * 17).rem_euclid(10) {
        0..=5 => Some("train"),
        6 => Some("valid"),
        7 => Some("test"),
        _ => None,
    }
}

/// `batch` with a column `name` of `values` added.
fn with_column(batch: &RecordBatch, name: &str, values: StringArray, nullable: bool) -> RecordBatch {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| (**f).clone()).collect();
    fields.push(Field::new(name, DataType::Utf8, nullable));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(values));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// An edge key's split and its parallel edges' weights (as bits, sorted).
type EdgeKey = (Option<&'static str>, Vec<u32>);

impl LinkDay {
    fn split(&self, a: i64, b: i64) -> Option<&'static str> {
        self.splits.get(&(a, b)).copied().or(rule(a, b))
    }

    /// `edges` as the edge table's rows, with their split.
    fn edges_batch(&self, edges: &[(i64, i64, f32)]) -> RecordBatch {
        let splits: StringArray = edges.iter().map(|&(a, b, _)| self.split(a, b)).collect();
        with_column(&edges_batch(edges), "split", splits, true)
    }

    /// The day's tables in `data/nodes` and `data/edges`, the edges with their split.
    fn write(&self, data: &Path) {
        let _ = std::fs::remove_dir_all(data);
        write_parquet(&data.join("nodes/part-0.parquet"), &nodes_batch(&self.day.nodes));
        write_parquet(&data.join("edges/part-0.parquet"), &self.edges_batch(&self.day.edges));
    }

    /// The delta from `before` to this day into `delta/nodes` and `delta/edges` (the schema's
    /// "Delta tables"): a node upserted when changed (this test adds and removes none), and
    /// every `(src, dst)` whose edges or split changed upserted as it is now, or deleted.
    fn write_delta(&self, before: &LinkDay, delta: &Path) {
        let _ = std::fs::remove_dir_all(delta);
        let old: BTreeMap<i64, &Node> = before.day.nodes.iter().map(|n| (n.0, n)).collect();
        let nodes: Vec<Node> = self.day.nodes.iter().filter(|n| old.get(&n.0) != Some(n)).cloned().collect();
        assert_eq!(nodes.len(), self.day.nodes.len() - old.len() + nodes.len(), "no node added or removed");
        let ops = StringArray::from(vec!["upsert"; nodes.len()]);
        write_parquet(&delta.join("nodes/part-0.parquet"), &with_column(&nodes_batch(&nodes), "op", ops, false));
        let by_key = |d: &LinkDay| {
            let mut keys: BTreeMap<(i64, i64), EdgeKey> = BTreeMap::new();
            for &(a, b, w) in &d.day.edges {
                keys.entry((a, b)).or_insert_with(|| (d.split(a, b), Vec::new())).1.push(w.to_bits());
            }
            keys.values_mut().for_each(|(_, w)| w.sort());
            keys
        };
        let (was, is) = (by_key(before), by_key(self));
        let (mut edges, mut ops) = (Vec::new(), Vec::new());
        for key in was.keys().chain(is.keys()).collect::<std::collections::BTreeSet<_>>() {
            match is.get(key) {
                now if now == was.get(key) => {}
                None => {
                    edges.push((key.0, key.1, 1.0));
                    ops.push("delete");
                }
                Some((_, weights)) => {
                    edges.extend(weights.iter().map(|w| (key.0, key.1, f32::from_bits(*w))));
                    ops.extend(weights.iter().map(|_| "upsert"));
                }
            }
        }
        let rows = with_column(&self.edges_batch(&edges), "op", StringArray::from(ops), false);
        write_parquet(&delta.join("edges/part-0.parquet"), &rows);
    }

    /// `n` edges given another split than they had (a supervision edge becomes another, or
    /// none; an edge with none becomes a training edge).
    fn change_splits(&mut self, rng: &mut Rng, n: usize) {
        for _ in 0..n {
            let (a, b, _) = self.day.edges[rng.below(self.day.edges.len())];
            let now = self.splits.get(&(a, b)).copied().or(rule(a, b));
            self.splits.insert((a, b), if now == Some("train") { "test" } else { "train" });
        }
    }

    /// `n` held-out edges moved between `valid` and `test`: neither is a message-passing edge,
    /// so no node changes, only the tasks.
    fn swap_held_out(&mut self, rng: &mut Rng, n: usize) {
        let mut swapped = 0;
        while swapped < n {
            let (a, b, _) = self.day.edges[rng.below(self.day.edges.len())];
            let other = match self.splits.get(&(a, b)).copied().or(rule(a, b)) {
                Some("valid") => "test",
                Some("test") => "valid",
                _ => continue,
            };
            self.splits.insert((a, b), other);
            swapped += 1;
        }
    }
}

/// Day 0 of a test in `dir`: a generated graph of `nodes` nodes (`seed`) written with its
/// splits to `dir/data`; and where the refreshed and the full runs' outputs go.
fn first_day(dir: &Path, nodes: u64, seed: u64) -> (LinkDay, [PathBuf; 3]) {
    generate(&dir.join("g"), nodes, 5, 4, seed);
    let day = LinkDay { day: Day::read(&dir.join("g")), splits: BTreeMap::new() };
    day.write(&dir.join("data"));
    (day, ["data", "links", "full"].map(|d| dir.join(d)))
}

/// The link job of the tests over `data` into `output`: half of the supervision edges, two
/// negatives each, each training edge held out of its own record.
fn job(data: &Path, output: &Path, incremental: bool) -> Job {
    Job::flatten(data, output)
        .key("task", "link")
        .key("negatives", 2)
        .key("supervision_fraction", 0.5)
        .key("disjoint_train", true)
        .key("hops", 2)
        .key("fanouts", vec![4, 3])
        .key("seed", 5)
        .key("hub_threshold", 40)
        .key("batch_size", 64)
        .key("part_size_mb", 1)
        .key("incremental", incremental)
        .key("overwrite", true)
}

/// Asserts that `refreshed` holds, row for row, the link records of a full run over `data`
/// (written to `full`), as pyarrow reads the directory and as the manifest lists its parts.
fn assert_exact(dir: &Path, data: &Path, refreshed: &Path, full: &Path, day: &str) {
    run_ok(&job(data, full, false).write(dir, "full"), &[]);
    let (got, want) = (listed_rows(refreshed), sorted_rows(&read_batches(full)));
    assert_eq!(got.len(), want.len(), "{day}: link record count");
    assert!(got == want, "{day}: the refreshed link records differ from a full run's");
    assert_eq!(read_links(refreshed).len(), want.len(), "{day}: every part in the directory is listed");
}

#[test]
fn a_link_refresh_writes_what_a_full_run_writes_day_after_day() {
    let dir = scratch("refresh-links");
    let (mut day, [data, out, full]) = first_day(&dir, 4_000, 11);
    let first = run_ok(&job(&data, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");

    type LinkChange<'a> = (&'a str, &'a dyn Fn(&mut LinkDay, &mut Rng), bool);
    // Each day's change, and whether it refreshes (a node added or removed moves most
    // negatives' draws, so most sources are dirty and the run is full, and says so).
    let changes: [LinkChange; 8] = [
        ("no change", &|_, _| {}, true),
        ("features of 2 nodes", &|d, r| d.day.change_nodes(r, 2), true),
        ("2 edges removed and 2 added", &|d, r| d.day.change_edges(r, 2), true),
        ("3 edges given another split", &|d, r| d.change_splits(r, 3), true),
        ("8 held-out edges between valid and test", &|d, r| d.swap_held_out(r, 8), true),
        ("a hub gains 200 in-edges", &|d, r| d.day.grow_hub(r, 200), true),
        ("nodes removed and added", &|d, r| d.day.change_node_set(r, 2), false),
        ("no change after a full run", &|_, _| {}, true),
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (i, (name, change, refreshes)) in changes.iter().enumerate() {
        change(&mut day, &mut rng);
        day.write(&data);
        let workers = ["1", "2", "3"][i % 3];
        let stdout = run_ok(&job(&data, &out, true).write(&dir, "day"), &["--workers", workers]);
        let line = refresh_line(&stdout);
        if *refreshes {
            assert!(line.starts_with("refresh: incremental over run"), "{name}: {line}");
            let (hit, all) = affected(&line);
            assert!(line.contains("link records affected"), "{name}: {line}");
            assert_eq!(hit == 0, name.starts_with("no change"), "{name}: {line}");
            assert!(hit * 4 <= all, "{name}: {line}");
            if name.starts_with("8 held-out") {
                // Found by the tasks' digests alone.
                assert!(line.contains(": 0 nodes changed, ") && hit > 0, "{name}: {line}");
                assert!(!line.contains(" 0 sources' tasks changed"), "{name}: {line}");
            }
        } else {
            assert!(line.contains("a full run is cheaper"), "{name}: {line}");
        }
        assert_exact(&dir, &data, &out, &full, name);
    }
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn a_link_refresh_on_two_processes_is_exact() {
    let dir = scratch("refresh-links-procs");
    let (mut day, [data, out, full]) = first_day(&dir, 3_000, 13);
    run_ok(&job(&data, &out, true).write(&dir, "day0"), &[]);
    let mut rng = Rng(91);
    day.day.change_edges(&mut rng, 2);
    day.change_splits(&mut rng, 2);
    day.write(&data);
    let procs = Job::loopback(2).and(job(&data, &out, true));
    let outputs = run_two_processes(&procs.write(&dir, "procs"), &dir);
    let line = refresh_line(&outputs.concat());
    assert!(line.starts_with("refresh: incremental over run"), "{line}");
    assert_exact(&dir, &data, &out, &full, "two processes");
}

/// A typed graph's link records (users buying items, negatives among items) refreshed day
/// after day equal a full run's: days that drop an edge between users, one that drops a buys
/// row (a supervision edge, and an item's in-edge: an item is the destination or a negative
/// of many tasks), and one with no change after it.
#[test]
fn a_typed_link_refresh_writes_what_a_full_run_writes() {
    let dir = scratch("refresh-links-typed");
    let (source, data, out, full) = (dir.join("source"), dir.join("data"), dir.join("links"), dir.join("full"));
    graphflat_ok(&["generate", "--hetero", "--out", source.to_str().unwrap(), "--nodes", "3000", "--seed", "3"]);
    // The buys table with a split column, in place of the generated one.
    let (buys, split) = (source.join("edges/buys"), dir.join("buys-split"));
    let args = ["--valid", "0.1", "--test", "0.1", "--seed", "2"];
    let split_edges = ["split-edges", "--edges", buys.to_str().unwrap(), "--out", split.to_str().unwrap()];
    graphflat_ok(&[&split_edges[..], &args[..]].concat());
    std::fs::remove_dir_all(&buys).unwrap();
    std::fs::rename(&split, &buys).unwrap();
    let job = |output: &Path, incremental: bool, name: &str| {
        let text = format!(
            "{}[flatten]\noutput = {:?}\ntask = \"link\"\nlink_relation = \"buys\"\nnegatives = 2\n\
             supervision_fraction = 0.5\ndisjoint_train = true\nhops = 2\nseed = 7\nincremental = {incremental}\n\
             overwrite = true\npart_size_mb = 1\nbatch_size = 64\n",
            crate::common::typed::graph_tables(&data),
            output.display().to_string(),
        );
        write_job(&dir, name, &text)
    };
    write_typed_day(&source, &data, &|_, _| false);
    let first = run_ok(&job(&out, true, "day0"), &[]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");
    // Each day drops rows of the generated tables (yesterday's are back).
    let days: [TypedDay; 5] = [
        ("no change", &|_, _| false),
        ("follows", &|t, i| t == "edges/follows" && i == 3),
        ("another follows", &|t, i| t == "edges/follows" && i == 8),
        ("buys", &|t, i| t == "edges/buys" && i == 5),
        ("buys again", &|t, i| t == "edges/buys" && i == 5),
    ];
    for (i, (name, drop)) in days.iter().enumerate() {
        write_typed_day(&source, &data, drop);
        let stdout = run_ok(&job(&out, true, "day"), &["--workers", ["1", "2"][i % 2]]);
        let line = refresh_line(&stdout);
        assert!(line.starts_with("refresh: incremental over run"), "{name}: {line}");
        let (hit, all) = affected(&line);
        assert_eq!(hit == 0, *name == "no change" || *name == "buys again", "{name}: {line}");
        assert!(hit * 4 <= all, "{name}: {line}");
        run_ok(&job(&full, false, "full"), &[]);
        let (got, want) = (listed_rows(&out), sorted_rows(&read_batches(&full)));
        assert_eq!(got.len(), want.len(), "{name}: link record count");
        assert!(got == want, "{name}: the refreshed link records differ from a full run's");
    }
}

/// The second way to say what changed: a link job fed delta tables (nodes changed, edges
/// added and removed, supervision edges given another split, each a row of `delta_edges` with
/// its `split`) refreshes to a full run's records over the day's snapshot.
#[test]
fn a_link_refresh_from_delta_tables_is_exact() {
    let dir = scratch("refresh-links-delta");
    let (mut day, [data, out, full]) = first_day(&dir, 3_000, 17);
    let delta = dir.join("delta");
    run_ok(&job(&data, &out, true).key("keep_graph", true).write(&dir, "day0"), &["--workers", "2"]);
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    for i in 0..2 {
        let before = day.clone();
        day.day.change_nodes(&mut rng, 1);
        day.day.change_edges(&mut rng, 1);
        day.change_splits(&mut rng, 2);
        day.write(&data);
        day.write_delta(&before, &delta);
        // The day's job with the delta in place of the tables.
        let keys = job(&data, &out, true).keys_of("flatten");
        let mut on_delta = Job::table_named("flatten");
        for (key, value) in keys.into_iter().filter(|(k, _)| k != "nodes" && k != "edges") {
            on_delta = on_delta.key(&key, value);
        }
        let on_delta = on_delta
            .key("delta_nodes", location(delta.join("nodes")))
            .key("delta_edges", location(delta.join("edges")));
        let stdout = run_ok(&on_delta.write(&dir, "delta"), &["--workers", ["1", "2"][i]]);
        let line = refresh_line(&stdout);
        assert!(stdout.contains("delta rows applied"), "day {i}: {stdout}");
        assert!(line.starts_with("refresh: incremental over run"), "day {i}: {line}");
        let (hit, all) = affected(&line);
        assert!(hit > 0 && hit * 4 <= all, "day {i}: {line}");
        assert_exact(&dir, &data, &out, &full, &format!("delta day {i}"));
    }
}

/// A link refresh killed (SIGKILL) at any moment, or inside its switch, leaves the output one
/// day's whole version, and the next refresh writes a full run's link records (or runs in full,
/// saying why, where the kill left the digests of another run than the output's).
#[test]
fn a_link_refresh_killed_at_any_moment_leaves_a_whole_version_and_the_next_is_exact() {
    let dir = scratch("refresh-links-kill");
    let (mut day, [data, out, full]) = first_day(&dir, 3_000, 19);
    let refresh = job(&data, &out, true).write(&dir, "day");
    run_ok(&refresh, &["--workers", "2"]);
    let mut rng = Rng(0x1405_7b7e_f767_814f);
    for stop in ["killed at moments", "killed inside the switch"] {
        let before = listed_rows(&out);
        day.day.change_nodes(&mut rng, 1);
        day.change_splits(&mut rng, 2);
        day.write(&data);
        run_ok(&job(&data, &full, false).write(&dir, "full"), &[]);
        let after = sorted_rows(&read_batches(&full));
        let whole = |when: &str| {
            let now = listed_rows(&out);
            assert!(now == before || now == after, "{when}: the link records are neither day's");
        };
        if stop == "killed at moments" {
            // A refresh here takes about 0.1 s from the process's start.
            let delays = [3, 8, 14, 20, 28, 36, 45, 55, 70, 90, 120, 160];
            let mut inside = 0;
            for delay_ms in delays {
                inside += usize::from(killed_after(&refresh, delay_ms));
                whole(&format!("killed after {delay_ms} ms"));
            }
            assert!(inside * 2 >= delays.len(), "only {inside} kills landed inside the run");
        } else {
            stopped_inside_its_switch(&refresh, &out, "KILL");
            whole(stop);
        }
        let stdout = run_ok(&refresh, &["--workers", "2"]);
        let line = refresh_line(&stdout);
        assert!(line.starts_with("refresh: incremental") || line.contains("digests beside the output"), "{stdout}");
        assert!(listed_rows(&out) == after, "{stop}: the next run's link records are not a full run's");
    }
}
