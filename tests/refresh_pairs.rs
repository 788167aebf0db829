//! GraphInfer's refresh of a link model's job with `pairs` (`docs/refresh.md`): the rows no
//! change reaches are carried over, and so is their last layer, read back from them, from which
//! every candidate is scored again. Day after day, on 1, 2 and 3 workers, the rows and the pair
//! scores are a full run's, bit for bit; rows that hold an earlier layer than the last run in
//! full and say why; a refresh killed at any moment leaves each output one day's whole version.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};

use crate::common::*;
use crate::refresh::{
    Day, Rng, assert_incremental, infer_changes, infer_job, killed_after, listed_rows, refresh_line,
    stopped_inside_its_switch,
};

/// The candidates of `day`: every 7th node against every 11th, the table written to `pairs`.
fn write_candidates(day: &Day, pairs: &Path) {
    let ids: Vec<i64> = day.nodes.iter().map(|n| n.0).collect();
    let (src, dst): (Vec<i64>, Vec<i64>) = ids.iter().step_by(7).zip(ids.iter().skip(3).step_by(11)).unzip();
    let batch = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(src)) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(dst)) as ArrayRef),
    ])
    .unwrap();
    let _ = std::fs::remove_dir_all(pairs);
    write_parquet(&pairs.join("part-0.parquet"), &batch);
}

/// A link model (GraphSAGE, `dot`) trained on the generated graph of `dir/link/generated`, its
/// edges split for the link task, in `dir/model`.
fn link_model(dir: &Path) -> std::path::PathBuf {
    let link = split_graph(&dir.join("link"), 3_000, 6, 5, 7);
    let flat = flatten(dir, &link, "links", &[], |j| j.key("task", "link").key("fanouts", vec![4, 3]).key("seed", 5));
    let model = dir.join("model");
    let train = Job::train(&flat, &model)
        .key("task", "link")
        .key("model", "sage")
        .key("hidden", 8)
        .key("embedding_dim", 8)
        .key("decoder", "dot")
        .key("epochs", 1);
    run_ok(&train.write(dir, "train"), &[]);
    model
}

/// The infer job with pairs: `output`'s rows and `pairs_output`'s scores.
fn pairs_job(dir: &Path, model: &Path, (output, pairs_output): (&Path, &Path), incremental: bool) -> Job {
    infer_job(&dir.join("data"), model, output, incremental)
        .key("pairs", location(dir.join("pairs")))
        .key("pairs_output", location(pairs_output))
}

#[test]
fn an_infer_refresh_with_pairs_writes_the_rows_and_scores_of_a_full_run_day_after_day() {
    let dir = scratch("refresh-pairs");
    let model = link_model(&dir);
    let mut day = Day::read(&dir.join("link/generated"));
    let (out, scored) = (dir.join("scores"), dir.join("pair-scores"));
    let (full, full_scored) = (dir.join("full"), dir.join("full-pair-scores"));
    day.write(&dir.join("data"));
    write_candidates(&day, &dir.join("pairs"));
    let first = run_ok(&pairs_job(&dir, &model, (&out, &scored), true).write(&dir, "day0"), &["--workers", "2"]);
    assert!(refresh_line(&first).contains("full: the output holds no committed version"), "{first}");

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (i, (name, change)) in infer_changes().iter().enumerate() {
        change(&mut day, &mut rng);
        day.write(&dir.join("data"));
        write_candidates(&day, &dir.join("pairs"));
        let workers = ["--workers", ["1", "2", "3"][i % 3]];
        let stdout = run_ok(&pairs_job(&dir, &model, (&out, &scored), true).write(&dir, "day"), &workers);
        assert_incremental(&stdout, name, i == 0);
        run_ok(&pairs_job(&dir, &model, (&full, &full_scored), false).write(&dir, "full"), &[]);
        let (got, want) = (listed_rows(&out), sorted_rows(&read_batches(&full)));
        assert_eq!(got.len(), want.len(), "{name}: rows");
        assert!(got == want, "{name}: the rows differ from a full run's");
        let (got, want) = (sorted_rows(&read_batches(&scored)), sorted_rows(&read_batches(&full_scored)));
        assert_eq!(got.len(), want.len(), "{name}: pairs scored");
        assert!(got == want, "{name}: the pair scores differ from a full run's");
    }
    assert_every_reader_reads_the_manifest(&[&out, &scored]);

    // Candidates from another table, their scores to another place: no other setting.
    write_candidates(&day, &dir.join("pairs-elsewhere"));
    let elsewhere = |job: Job| job.key("pairs", location(dir.join("pairs-elsewhere")));
    let other = dir.join("elsewhere-scores");
    let stdout = run_ok(&elsewhere(pairs_job(&dir, &model, (&out, &other), true)).write(&dir, "elsewhere"), &[]);
    assert_incremental(&stdout, "another pairs table", true);
    run_ok(&elsewhere(pairs_job(&dir, &model, (&full, &full_scored), false)).write(&dir, "full"), &[]);
    assert!(sorted_rows(&read_batches(&other)) == sorted_rows(&read_batches(&full_scored)), "another pairs table");

    // Rows of an earlier layer than the last: the pairs need every node's last layer.
    let earlier = pairs_job(&dir, &model, (&out, &scored), true).key("embedding", 1);
    let stdout = run_ok(&earlier.write(&dir, "earlier"), &[]);
    assert!(refresh_line(&stdout).contains("the rows hold an earlier one"), "{stdout}");
}

/// A refresh with pairs killed (SIGKILL) at any moment, or inside the switch of either output,
/// leaves each output one day's whole version: the two outputs are not one atomic step
/// (`docs/graphinfer.md`), so a kill between their switches leaves today's rows beside
/// yesterday's scores. SIGTERM inside a switch finishes the commit. Whatever a kill left, the
/// next run (a refresh, or a full run where the kill left the digests of another run than the
/// rows) writes a full run's rows and scores.
#[test]
fn a_pairs_refresh_killed_at_any_moment_leaves_whole_versions_and_the_next_is_exact() {
    let dir = scratch("refresh-pairs-kill");
    let model = link_model(&dir);
    let mut day = Day::read(&dir.join("link/generated"));
    let (out, scored) = (dir.join("scores"), dir.join("pair-scores"));
    let (full, full_scored) = (dir.join("full"), dir.join("full-pair-scores"));
    let both = |rows: &Path, scores: &Path| (listed_rows(rows), listed_rows(scores));
    day.write(&dir.join("data"));
    write_candidates(&day, &dir.join("pairs"));
    let refresh = pairs_job(&dir, &model, (&out, &scored), true).write(&dir, "day");
    let full_run = pairs_job(&dir, &model, (&full, &full_scored), false).write(&dir, "full");
    run_ok(&refresh, &["--workers", "2"]);
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let stops: [(&Path, &str); 4] = [(&out, "KILL"), (&scored, "KILL"), (&out, "TERM"), (&scored, "TERM")];
    for (output, signal) in stops {
        let before = both(&out, &scored);
        day.change_edges(&mut rng, 8);
        day.write(&dir.join("data"));
        run_ok(&full_run, &[]);
        let after = both(&full, &full_scored);
        let whole = |now: &(Vec<String>, Vec<String>), when: &str| {
            assert!(now.0 == before.0 || now.0 == after.0, "{when}: the rows are neither day's");
            assert!(now.1 == before.1 || now.1 == after.1, "{when}: the scores are neither day's");
        };
        // A refresh here takes about 40 ms from the process's start.
        for delay_ms in [3, 8, 13, 18, 23, 28, 33, 38, 43, 48, 56] {
            killed_after(&refresh, delay_ms);
            whole(&both(&out, &scored), &format!("killed after {delay_ms} ms"));
        }
        let ended = stopped_inside_its_switch(&refresh, output, signal);
        let now = both(&out, &scored);
        let inside = format!("{signal} inside the switch of {}", output.display());
        match signal {
            "TERM" => {
                assert_eq!(ended.status.code(), Some(0), "{inside}: {}", text(&ended));
                assert!(now == after, "{inside}: not the refresh's versions");
            }
            _ => whole(&now, &inside),
        }
        // A kill between the outputs' switches and the digests' leaves them of two runs: the
        // next refresh then runs in full and says so.
        let stdout = run_ok(&refresh, &["--workers", "2"]);
        let line = refresh_line(&stdout);
        assert!(line.starts_with("refresh: incremental") || line.contains("digests beside the output"), "{stdout}");
        assert!(both(&out, &scored) == after, "after a {inside}: not a full run's rows and scores");
    }
}
