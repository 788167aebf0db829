//! A refresh from delta tables (`keep_graph`, `delta_nodes`, `delta_edges`; `docs/refresh.md`,
//! "Delta tables"): day after day, the delta between two snapshots (rows upserted and deleted,
//! parallel edges, a hub, nodes gone with their edges) applied to the graph kept beside the
//! output gives the records and scores a full run over the second snapshot writes, bit for bit;
//! a delta applied twice (a retried run) changes nothing; bad deltas are errors naming file, row
//! and column, and leave the kept graph and the output as they were.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::common::*;
use crate::refresh::{
    Day, Node, Rng, affected, assert_exact, changes, edges_batch, infer_job, job, killed_after, listed_rows,
    nodes_batch, refresh_line,
};

/// `batch` with an `op` column of `ops`.
fn with_op(batch: &RecordBatch, ops: Vec<&str>) -> RecordBatch {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("op", DataType::Utf8, false));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(ops)) as ArrayRef);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Writes the delta from `before` to `after` into `delta/nodes` and `delta/edges`, each in two
/// files: a node upserted when new or changed, deleted when gone; for every `(src, dst)` whose
/// parallel edges changed, the edges it has now upserted, or a delete when it has none.
fn write_delta(before: &Day, after: &Day, delta: &Path) {
    let _ = std::fs::remove_dir_all(delta);
    let old: BTreeMap<i64, &Node> = before.nodes.iter().map(|n| (n.0, n)).collect();
    let new: BTreeMap<i64, &Node> = after.nodes.iter().map(|n| (n.0, n)).collect();
    let mut nodes: Vec<(Node, &str)> = Vec::new();
    nodes.extend(after.nodes.iter().filter(|n| old.get(&n.0) != Some(n)).map(|n| (n.clone(), "upsert")));
    nodes.extend(before.nodes.iter().filter(|n| !new.contains_key(&n.0)).map(|n| (n.clone(), "delete")));
    let by_key = |edges: &[(i64, i64, f32)]| {
        let mut keys: BTreeMap<(i64, i64), Vec<u32>> = BTreeMap::new();
        edges.iter().for_each(|e| keys.entry((e.0, e.1)).or_default().push(e.2.to_bits()));
        keys.values_mut().for_each(|w| w.sort());
        keys
    };
    let (was, is) = (by_key(&before.edges), by_key(&after.edges));
    let mut edges: Vec<((i64, i64, f32), &str)> = Vec::new();
    for key in was.keys().chain(is.keys()).collect::<std::collections::BTreeSet<_>>() {
        match is.get(key) {
            now if now == was.get(key) => {}
            None => edges.push(((key.0, key.1, 1.0), "delete")),
            Some(weights) => edges.extend(weights.iter().map(|w| ((key.0, key.1, f32::from_bits(*w)), "upsert"))),
        }
    }
    for half in 0..2 {
        let part = |len: usize| if half == 0 { 0..len / 2 } else { len / 2..len };
        let (n, e) = (&nodes[part(nodes.len())], &edges[part(edges.len())]);
        let rows: Vec<Node> = n.iter().map(|(row, _)| row.clone()).collect();
        let nodes_file = delta.join(format!("nodes/part-{half}.parquet"));
        write_parquet(&nodes_file, &with_op(&nodes_batch(&rows), n.iter().map(|(_, op)| *op).collect()));
        let rows: Vec<(i64, i64, f32)> = e.iter().map(|(row, _)| *row).collect();
        let edges_file = delta.join(format!("edges/part-{half}.parquet"));
        write_parquet(&edges_file, &with_op(&edges_batch(&rows), e.iter().map(|(_, op)| *op).collect()));
    }
}

/// `job` (a section over `data/nodes` and `data/edges`) reading the delta in `delta` instead.
fn on_delta(job: Job, section: &str, delta: &Path) -> Job {
    let mut keys = job.keys_of(section);
    keys.remove("nodes");
    keys.remove("edges");
    let mut delta_job = Job::table_named(if section == "flatten" { "flatten" } else { "infer" });
    for (key, value) in keys {
        delta_job = delta_job.key(&key, value);
    }
    delta_job.key("delta_nodes", location(delta.join("nodes"))).key("delta_edges", location(delta.join("edges")))
}

/// The summary's `kept graph:` line.
fn graph_line(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.trim_start().starts_with("kept graph:"));
    line.unwrap_or_else(|| panic!("no graph line:\n{stdout}")).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_refresh_from_delta_tables_writes_what_a_full_run_writes_day_after_day() {
    let dir = scratch("refresh-delta");
    generate(&dir.join("g"), 1_500, 6, 5, 7);
    let mut day = Day::read(&dir.join("g"));
    let (data, delta, out, full) = (dir.join("data"), dir.join("delta"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    let first = run_ok(&job(&data, &out, true).key("keep_graph", true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(graph_line(&first).contains("the snapshot copied beside the output"), "{first}");
    assert_eq!(manifest(&out)["settings"]["kept_graph"], "a", "the output names the slot it kept");
    for kept in [".flat.graphflat-nodes-a", ".flat.graphflat-edges-a"] {
        assert!(dir.join(kept).join("_SUCCESS").exists(), "{kept} is committed");
    }

    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (i, (name, change)) in changes().iter().enumerate() {
        let before = day.clone();
        change(&mut day, &mut rng);
        day.write(&data);
        write_delta(&before, &day, &delta);
        let workers = ["1", "2", "3"][i % 3];
        let stdout =
            run_ok(&on_delta(job(&data, &out, true), "flatten", &delta).write(&dir, "delta"), &["--workers", workers]);
        let (graph, line) = (graph_line(&stdout), refresh_line(&stdout));
        assert!(graph.contains("delta rows applied"), "{name}: {graph}");
        assert!(line.starts_with("refresh: incremental over run"), "{name}: {line}");
        let (hit, all) = affected(&line);
        assert_eq!(hit == 0, i == 0, "{name}: {line}");
        assert!(hit * 4 <= all, "{name}: {line}");
        if i == 0 {
            assert!(graph.contains("0 written again"), "{name}: an empty delta carries the graph: {graph}");
        }
        assert_exact(&dir, &data, &out, &full, name);
        if i == 2 {
            // A retried run applies the same delta again: nothing changes.
            let again = run_ok(&on_delta(job(&data, &out, true), "flatten", &delta).write(&dir, "again"), &[]);
            assert!(refresh_line(&again).contains(" 0 nodes changed"), "a delta applied twice:\n{again}");
            assert_exact(&dir, &data, &out, &full, "the same delta again");
        }
    }
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn an_infer_refresh_from_delta_tables_writes_what_a_full_run_writes() {
    let dir = scratch("refresh-delta-infer");
    generate(&dir.join("g"), 1_500, 6, 5, 7);
    let mut day = Day::read(&dir.join("g"));
    let (data, delta, model) = (dir.join("data"), dir.join("delta"), dir.join("model"));
    let (out, full) = (dir.join("scores"), dir.join("full"));
    day.write(&data);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![4, 3]).key("seed", 5));
    let train = Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).key("model", "sage");
    run_ok(&train.write(&dir, "train"), &[]);
    let keep = infer_job(&data, &model, &out, true).key("keep_graph", true);
    run_ok(&keep.write(&dir, "day0"), &["--workers", "2"]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (i, (name, change)) in changes().iter().enumerate().skip(1).take(3) {
        let before = day.clone();
        change(&mut day, &mut rng);
        day.write(&data);
        write_delta(&before, &day, &delta);
        let job = on_delta(infer_job(&data, &model, &out, true), "infer", &delta);
        let stdout = run_ok(&job.write(&dir, "delta"), &["--workers", ["1", "2", "3"][i % 3]]);
        // A day that reaches more than 1 in 10 of these 1,500 nodes runs in full.
        let incremental = refresh_line(&stdout).starts_with("refresh: incremental over run");
        assert!(incremental || i > 1, "{name}:\n{stdout}");
        run_ok(&infer_job(&data, &model, &full, false).write(&dir, "full"), &[]);
        assert_eq!(listed_rows(&out), sorted_rows(&read_batches(&full)), "{name}: the rows differ from a full run's");
    }
}

#[test]
fn a_bad_delta_is_an_error_that_names_file_row_and_column_and_changes_nothing() {
    let dir = scratch("refresh-delta-bad");
    generate(&dir.join("g"), 300, 4, 3, 7);
    let day = Day::read(&dir.join("g"));
    let (data, delta, out) = (dir.join("data"), dir.join("delta"), dir.join("flat"));
    day.write(&data);
    let delta_job = || on_delta(job(&data, &out, true), "flatten", &delta);

    // No kept graph yet.
    write_delta(&day, &day, &delta);
    let failed = run(&delta_job().write(&dir, "none"), &[]);
    assert_eq!(failed.status.code(), Some(66), "{}", text(&failed));
    assert!(text(&failed).contains("keep_graph = true"), "{}", text(&failed));

    run_ok(&job(&data, &out, true).key("keep_graph", true).write(&dir, "day0"), &[]);
    let runs = || {
        let slot = manifest(&out)["settings"]["kept_graph"].as_str().unwrap().to_owned();
        let kept = [format!(".flat.graphflat-nodes-{slot}"), format!(".flat.graphflat-edges-{slot}"), "flat".into()];
        kept.map(|d| manifest(&dir.join(d))["run"].clone())
    };
    let before = runs();
    let mut changed = day.clone();
    changed.nodes[0].1[0] += 1.0;
    changed.edges.truncate(changed.edges.len() - 1);

    // Bad rows in a delta of a real change.
    write_delta(&day, &changed, &delta);
    bad_rows_are_named(&dir, &delta, &changed.nodes[0], &delta_job);

    // Snapshot tables named beside a delta.
    let both = delta_job().key("nodes", location(data.join("nodes")));
    let failed = run(&both.write(&dir, "both"), &[]);
    assert_eq!(failed.status.code(), Some(64), "{}", text(&failed));
    assert!(text(&failed).contains("starts over"), "{}", text(&failed));

    // An upsert the graph's checks refuse (an edge to no node) fails when the stage reads the
    // new slot: the current slot and the output stay, and the next delta applies to them.
    let missing = vec![(changed.nodes[1].0, 999_999, 1.0)];
    write_delta(&day, &changed, &delta);
    let edges_file = delta.join("edges/part-0.parquet");
    write_parquet(&edges_file, &with_op(&edges_batch(&missing), vec!["upsert"]));
    let failed = run(&delta_job().write(&dir, "missing"), &[]);
    assert_eq!(failed.status.code(), Some(65), "{}", text(&failed));
    assert!(text(&failed).contains("999999"), "{}", text(&failed));
    assert_eq!(runs(), before, "a failed delta run leaves the kept graph and the output as they were");
    write_delta(&day, &changed, &delta);
    changed.write(&data);
    run_ok(&delta_job().write(&dir, "after"), &[]);
    assert_exact(&dir, &data, &out, &dir.join("full"), "a delta after a failed one");
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// A delta's bad rows, each exit 65 naming file, row and column: an op that is neither
/// upsert nor delete, a column the kept table does not have (and one it lacks), a node
/// upserted twice.
fn bad_rows_are_named(dir: &Path, delta: &Path, row: &Node, delta_job: &dyn Fn() -> Job) {
    // An op that is neither upsert nor delete.
    let rows: Vec<Node> = vec![row.clone()];
    std::fs::remove_dir_all(delta.join("nodes")).unwrap();
    let file = delta.join("nodes/part-0.parquet");
    write_parquet(&file, &with_op(&nodes_batch(&rows), vec!["update"]));
    let failed = run(&delta_job().write(dir, "op"), &[]);
    assert_eq!(failed.status.code(), Some(65), "{}", text(&failed));
    for named in ["part-0.parquet", "row 0", "op", "\"update\""] {
        assert!(text(&failed).contains(named), "{named}: {}", text(&failed));
    }

    // A column the kept table does not have, and one it lacks.
    let renamed = nodes_batch(&rows);
    let mut fields: Vec<Field> = renamed.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[3] = Field::new("fold", DataType::Utf8, true);
    let renamed = RecordBatch::try_new(Arc::new(Schema::new(fields)), renamed.columns().to_vec()).unwrap();
    write_parquet(&file, &with_op(&renamed, vec!["upsert"]));
    let failed = run(&delta_job().write(dir, "columns"), &[]);
    assert_eq!(failed.status.code(), Some(65), "{}", text(&failed));
    assert!(text(&failed).contains("split") && text(&failed).contains("part-0.parquet"), "{}", text(&failed));

    // A node upserted twice in one delta.
    let twice = vec![rows[0].clone(), rows[0].clone()];
    write_parquet(&file, &with_op(&nodes_batch(&twice), vec!["upsert", "upsert"]));
    let failed = run(&delta_job().write(dir, "twice"), &[]);
    assert_eq!(failed.status.code(), Some(65), "{}", text(&failed));
    assert!(text(&failed).contains("row 1") && text(&failed).contains("second upsert"), "{}", text(&failed));
}

#[test]
fn a_delta_run_on_two_processes_is_exact() {
    let dir = scratch("refresh-delta-procs");
    generate(&dir.join("g"), 1_200, 6, 4, 9);
    let mut day = Day::read(&dir.join("g"));
    let (data, delta, out, full) = (dir.join("data"), dir.join("delta"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    let keep = Job::loopback(2).and(job(&data, &out, true).key("keep_graph", true));
    run_two_processes(&keep.write(&dir, "day0"), &dir);
    let before = day.clone();
    let mut rng = Rng(77);
    day.change_edges(&mut rng, 5);
    day.change_node_set(&mut rng, 2);
    day.write(&data);
    write_delta(&before, &day, &delta);
    let procs = Job::loopback(2).and(on_delta(job(&data, &out, true), "flatten", &delta));
    run_two_processes(&procs.write(&dir, "procs"), &dir);
    assert_exact(&dir, &data, &out, &full, "two processes");
}

#[test]
fn a_delta_run_killed_at_any_moment_leaves_whole_versions_and_its_retry_is_exact() {
    let dir = scratch("refresh-delta-kill");
    // Large enough that a run takes a few hundred milliseconds, so that the kills land in the
    // kept graph's writing and commit as well as in the refresh.
    generate(&dir.join("g"), 20_000, 6, 8, 11);
    let mut day = Day::read(&dir.join("g"));
    let (data, delta, out, full) = (dir.join("data"), dir.join("delta"), dir.join("flat"), dir.join("full"));
    day.write(&data);
    run_ok(&job(&data, &out, true).key("keep_graph", true).write(&dir, "day0"), &["--workers", "2"]);
    let (records_before, graph_before) = (read_records(&out), kept_rows(&dir));
    let before = day.clone();
    let mut rng = Rng(5);
    day.change_edges(&mut rng, 60);
    day.change_nodes(&mut rng, 20);
    day.write(&data);
    write_delta(&before, &day, &delta);
    run_ok(&job(&data, &full, false).write(&dir, "full"), &[]);
    let records_after = read_records(&full);
    let refresh = on_delta(job(&data, &out, true), "flatten", &delta).write(&dir, "day1");
    let mut graph_after = None;
    for delay_ms in [10, 30, 60, 90, 130, 180, 250, 350] {
        killed_after(&refresh, delay_ms);
        let records = read_listed_records(&out);
        assert!(records == records_before || records == records_after, "killed after {delay_ms} ms: the records");
        let graph = kept_rows(&dir);
        if graph != graph_before {
            // Once the kept graph moved on, it is the day's whole graph and stays so.
            assert!(
                graph_after.get_or_insert_with(|| graph.clone()) == &graph,
                "killed after {delay_ms} ms: the graph"
            );
        }
    }
    // A kill between the output's commit and its digests' makes the retry a full run (it says
    // so); either way it is exact.
    let stdout = run_ok(&refresh, &["--workers", "2"]);
    assert!(refresh_line(&stdout).starts_with("refresh:"), "{stdout}");
    assert_exact(&dir, &data, &out, &full, "after the kills");
}

/// The rows the manifests of the kept graph that `dir/flat` names list, nodes then edges, as
/// text.
fn kept_rows(dir: &Path) -> Vec<String> {
    let slot = manifest(&dir.join("flat"))["settings"]["kept_graph"].as_str().unwrap().to_owned();
    let kept = [format!(".flat.graphflat-nodes-{slot}"), format!(".flat.graphflat-edges-{slot}")];
    kept.iter().flat_map(|kept| listed_rows(&dir.join(kept))).collect()
}

/// `batch` with its integer id columns `columns` as strings (`n<id>`).
fn stringified(batch: &RecordBatch, columns: &[&str]) -> RecordBatch {
    use arrow_array::cast::AsArray;
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if columns.contains(&field.name().as_str()) {
            let ids = column.as_primitive::<arrow_array::types::Int64Type>();
            arrays.push(Arc::new(ids.iter().map(|id| id.map(|id| format!("n{id}"))).collect::<StringArray>()) as ArrayRef);
            fields.push(Field::new(field.name(), DataType::Utf8, false));
        } else {
            arrays.push(column.clone());
            fields.push(field.as_ref().clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

#[test]
fn a_delta_of_string_ids_is_applied_by_its_strings() {
    let dir = scratch("refresh-delta-strings");
    generate(&dir.join("g"), 1_000, 6, 4, 3);
    let mut day = Day::read(&dir.join("g"));
    let (data, delta, out, full) = (dir.join("data"), dir.join("delta"), dir.join("flat"), dir.join("full"));
    let with_strings = |dir: &Path| {
        for (table, ids) in [("nodes", &["node_id"][..]), ("edges", &["src", "dst"][..])] {
            for entry in std::fs::read_dir(dir.join(table)).unwrap() {
                let path = entry.unwrap().path();
                let batches = batches_in([path.clone()]);
                let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
                write_parquet(&path, &stringified(&all, ids));
            }
        }
    };
    day.write(&data);
    with_strings(&data);
    run_ok(&job(&data, &out, true).key("keep_graph", true).write(&dir, "day0"), &[]);
    let before = day.clone();
    let mut rng = Rng(3);
    day.change_nodes(&mut rng, 4);
    day.change_edges(&mut rng, 4);
    day.change_node_set(&mut rng, 1);
    day.write(&data);
    with_strings(&data);
    write_delta(&before, &day, &delta);
    with_strings(&delta);
    let stdout = run_ok(&on_delta(job(&data, &out, true), "flatten", &delta).write(&dir, "delta"), &["--workers", "2"]);
    assert!(refresh_line(&stdout).starts_with("refresh: incremental"), "{stdout}");
    assert_exact(&dir, &data, &out, &full, "string ids");
}
