//! GraphInfer's refresh over a graph keyed by strings (`docs/refresh.md`): its rows name their
//! nodes by string, and a refresh finds each row's node by the string's internal id
//! (`schemas::ids`). Over days of random changes the refreshed rows are a full run's, bit for
//! bit, on 1, 2 and 3 workers, and a typed graph's rows (found by type name and string) too.
//! Strings that share their hash with another's take ids of their day's numbering, so a day
//! with such strings runs in full, and so does the day after it, whose rows are still a full
//! run's when the strings that lost their hash are gone.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use schemas::ids::StringHash;

use crate::common::*;
use crate::refresh::{
    Day, Rng, TYPED_TABLES, TypedDay, affected, assert_incremental, infer_changes, infer_job, listed_rows, refresh_line,
};
use crate::string_ids::COLLIDED;

/// The first integer that stands for a string of [`COLLIDED`] in a [`Day`]: `COLLIDED_AT + i`
/// is the `i`-th string of the pairs, in order.
const COLLIDED_AT: i64 = 1 << 40;

/// The string of the node the day numbers `id`.
fn string_of(id: i64) -> String {
    if id < COLLIDED_AT {
        return format!("n{id}");
    }
    let i = (id - COLLIDED_AT) as usize;
    let (a, b) = COLLIDED[i / 2];
    [a, b][i % 2].to_owned()
}

/// `batch` with its integer id `columns` as the strings of [`string_of`].
fn keyed(batch: &RecordBatch, columns: &[&str]) -> RecordBatch {
    let (mut fields, mut arrays): (Vec<Field>, Vec<ArrayRef>) = (Vec::new(), Vec::new());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if columns.contains(&field.name().as_str()) {
            let ids = column.as_primitive::<Int64Type>();
            arrays.push(Arc::new(ids.iter().map(|id| id.map(string_of)).collect::<StringArray>()));
            fields.push(Field::new(field.name(), DataType::Utf8, false));
        } else {
            arrays.push(column.clone());
            fields.push(field.as_ref().clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

/// The day's tables under `data`, keyed by strings.
fn write_keyed(day: &Day, data: &Path) {
    day.write(data);
    for (table, columns) in [("nodes", &["node_id"][..]), ("edges", &["src", "dst"][..])] {
        let path = data.join(table).join("part-0.parquet");
        let batches = batches_in([path.clone()]);
        let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        write_parquet(&path, &keyed(&all, columns));
    }
}

/// A generated graph of `n` nodes as a [`Day`].
fn generated(dir: &Path, n: u64) -> Day {
    generate(&dir.join("g"), n, 6, 5, 7);
    Day::read(&dir.join("g"))
}

/// A GraphSAGE model trained on the records of `data` into `dir/model`.
fn trained(dir: &Path, data: &Path) -> std::path::PathBuf {
    let flat = flatten(dir, data, "flat", &[], |job| job.key("fanouts", vec![4, 3]).key("seed", 5));
    let model = dir.join("model");
    let job = Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).key("model", "sage");
    run_ok(&job.write(dir, "train"), &[]);
    model
}

/// Asserts that the rows of `out` are those of a full run over `data` (written to `full`).
fn assert_exact(dir: &Path, (data, model): (&Path, &Path), (out, full): (&Path, &Path), day: &str) {
    run_ok(&infer_job(data, model, full, false).write(dir, "full"), &[]);
    let (got, want) = (listed_rows(out), sorted_rows(&read_batches(full)));
    let only =
        |a: &[String], b: &[String]| a.iter().filter(|r| b.binary_search(r).is_err()).cloned().collect::<Vec<_>>();
    let (extra, missing) = (only(&got, &want), only(&want, &got));
    assert!(
        extra.is_empty() && missing.is_empty() && got.len() == want.len(),
        "{day}: {} rows against a full run's {}: {} not among the full run's (the first: {:?}), {} missing",
        got.len(),
        want.len(),
        extra.len(),
        extra.first(),
        missing.len()
    );
}

#[test]
fn an_infer_refresh_over_string_ids_writes_what_a_full_run_writes_day_after_day() {
    let dir = scratch("refresh-strings");
    let mut day = generated(&dir, 3_000);
    let (data, out, full) = (dir.join("data"), dir.join("scores"), dir.join("full"));
    write_keyed(&day, &data);
    let model = trained(&dir, &data);
    let first = run_ok(&infer_job(&data, &model, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");

    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (i, (name, change)) in infer_changes().iter().enumerate() {
        change(&mut day, &mut rng);
        write_keyed(&day, &data);
        let workers = ["1", "2", "3"][i % 3];
        let stdout = run_ok(&infer_job(&data, &model, &out, true).write(&dir, "day"), &["--workers", workers]);
        assert_incremental(&stdout, name, i == 0);
        assert_exact(&dir, (&data, &model), (&out, &full), name);
    }
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// The nodes of [`COLLIDED`] added to `day` (numbered from [`COLLIDED_AT`]), each with an
/// in-edge and an out-edge; returns the numbers of those that lose their hash.
fn with_collided(day: &mut Day) -> Vec<i64> {
    let dim = day.nodes[0].1.len();
    let mut losers = Vec::new();
    for (i, (a, b)) in COLLIDED.iter().enumerate() {
        let (a_id, b_id) = (COLLIDED_AT + 2 * i as i64, COLLIDED_AT + 2 * i as i64 + 1);
        losers.push(if StringHash::of(a).g < StringHash::of(b).g { b_id } else { a_id });
        for (k, id) in [a_id, b_id].into_iter().enumerate() {
            let near = day.nodes[3 * i + k].0;
            day.nodes.push((id, vec![0.5 + k as f32; dim], Some(1), Some("train".into())));
            day.edges.extend([(near, id, 1.0), (id, near, 1.0)]);
        }
    }
    losers
}

#[test]
fn strings_that_share_a_hash_make_their_day_and_the_next_run_in_full_and_exact() {
    let dir = scratch("refresh-strings-collided");
    let mut day = generated(&dir, 2_000);
    let losers = with_collided(&mut day);
    let (data, out, full) = (dir.join("data"), dir.join("scores"), dir.join("full"));
    write_keyed(&day, &data);
    let model = trained(&dir, &data);
    let run = |name: &str| {
        let stdout = run_ok(&infer_job(&data, &model, &out, true).write(&dir, name), &["--workers", "2"]);
        refresh_line(&stdout)
    };
    run("day0");
    let line = run("again");
    assert!(line.contains(&format!("full: {} node strings share their hash", COLLIDED.len())), "{line}");
    assert_exact(&dir, (&data, &model), (&out, &full), "a day with collided strings");

    // The strings that lost their hash are gone: their rows carried would be found by the
    // hash, which their winners (unchanged) hold.
    day.nodes.retain(|n| !losers.contains(&n.0));
    day.edges.retain(|e| !losers.contains(&e.0) && !losers.contains(&e.1));
    write_keyed(&day, &data);
    let line = run("losers gone");
    assert_exact(&dir, (&data, &model), (&out, &full), "the day after");
    assert!(line.contains("full: the rows' schema or metadata changed"), "{line}");
    let rows = read_batches(&out);
    let names: Vec<&str> =
        rows.iter().flat_map(|b| b.column_by_name("node_id").unwrap().as_string::<i32>().iter().flatten()).collect();
    for loser in &losers {
        assert!(!names.contains(&string_of(*loser).as_str()), "a row of {} is left", string_of(*loser));
    }

    // No day with collided strings behind it: a refresh again, exact.
    day.change_nodes(&mut Rng(7), 3);
    write_keyed(&day, &data);
    let line = run("a change");
    assert!(line.starts_with("refresh: incremental over run"), "{line}");
    assert_exact(&dir, (&data, &model), (&out, &full), "two days without collided strings");
}

/// The generated typed graph of `source` into `data` keyed by strings (every type's ids as
/// [`string_of`]'s, so that a user and an item share each string), without the edge rows `i`
/// of table `t` for which `drop(t, i)`.
fn write_typed_keyed(source: &Path, data: &Path, drop: &dyn Fn(&str, usize) -> bool) {
    for table in TYPED_TABLES {
        let batches = read_batches(&source.join(table));
        let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        let keep: arrow_array::BooleanArray = (0..all.num_rows()).map(|i| Some(!drop(table, i))).collect();
        let rows = arrow_select::filter::filter_record_batch(&all, &keep).unwrap();
        let _ = std::fs::remove_dir_all(data.join(table));
        write_parquet(&data.join(table).join("part-0.parquet"), &keyed(&rows, &["node_id", "src", "dst"]));
    }
}

/// A typed graph keyed by strings: an R-GCN's scores of every type, refreshed as edges of each
/// relation go, equal a full run's (a row is found by its type's name and its string).
#[test]
fn a_typed_refresh_over_string_ids_writes_what_a_full_run_writes() {
    let dir = scratch("refresh-strings-typed");
    let (source, data) = (dir.join("source"), dir.join("data"));
    graphflat_ok(&["generate", "--hetero", "--out", source.to_str().unwrap(), "--nodes", "6000", "--seed", "3"]);
    let at = |p: &Path| p.display().to_string();
    let graph = crate::common::typed::graph_tables(&data);
    let job = |section: &str, keys: String, name: &str| {
        let text = format!("{graph}[{section}]\n{keys}target_type = \"user\"\noverwrite = true\npart_size_mb = 1\n");
        write_job(&dir, name, &text)
    };
    let (flat, model, scores, full) = (dir.join("flat"), dir.join("model"), dir.join("scores"), dir.join("full"));
    let infer = |output: &Path, incremental: bool, name: &str| {
        let keys = format!(
            "model = {:?}\noutput = {:?}\nhub_threshold = 6\nincremental = {incremental}\n",
            at(&model),
            at(output)
        );
        job("infer", keys, name)
    };
    write_typed_keyed(&source, &data, &|_, _| false);
    run_ok(&job("flatten", format!("output = {:?}\n", at(&flat)), "flatten"), &[]);
    let train = format!(
        "[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 1\n",
        at(&flat),
        at(&model)
    );
    run_ok(&write_job(&dir, "train", &train), &[]);
    run_ok(&infer(&scores, true, "day0"), &[]);
    let days: [TypedDay; 3] = [
        ("follows", &|t, i| t == "edges/follows" && i == 3),
        ("buys", &|t, i| t == "edges/buys" && i == 5),
        ("sells", &|t, i| t == "edges/sells" && i == 1),
    ];
    for (i, (name, drop)) in days.iter().enumerate() {
        write_typed_keyed(&source, &data, drop);
        let stdout = run_ok(&infer(&scores, true, "day"), &["--workers", ["2", "1"][i % 2]]);
        let line = refresh_line(&stdout);
        assert!(line.starts_with("refresh: incremental over run"), "{name}: {line}");
        assert!(affected(&line).0 > 0, "{name}: {line}");
        run_ok(&infer(&full, false, "full"), &[]);
        assert_eq!(
            listed_rows(&scores),
            sorted_rows(&read_batches(&full)),
            "{name}: the rows differ from a full run's"
        );
    }
}
