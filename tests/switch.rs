//! The switch on a local disk (`tables::switch`): readers of a directory see one committed
//! version at every instant, while a job replaces it, after a stop inside the switch, and after
//! kill -9 at any moment; what a killed switch leaves beside the output is settled by the next
//! command that opens it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// The pause `tables::switch` makes between moving folders in and the exchange, for tests.
const PAUSE: &str = "GRAPHFLAT_TEST_SWITCH_PAUSE_MS";

/// The job flattening `graph` into `out` with overwrite: every record (`all`) or the train
/// split's (so two versions differ in rows, and a mix of them repeats root ids).
fn job(dir: &Path, graph: &Path, out: &Path, all: bool, name: &str) -> PathBuf {
    let job = Job::flatten(graph, out).key("overwrite", true).key("fanouts", vec![4, 4]);
    let job = if all { job } else { job.key("targets", vec!["train"]) };
    job.write(dir, name)
}

/// The delay the signal thread makes before its message (`src/exit.rs`), for tests.
const SAY_DELAY: &str = "GRAPHFLAT_TEST_STOP_SAY_DELAY_MS";

fn spawn(job: &Path, pause_ms: Option<u64>) -> Child {
    spawn_with(job, pause_ms, &[])
}

fn spawn_with(job: &Path, pause_ms: Option<u64>, env: &[(&str, &str)]) -> Child {
    let mut command = graphflat();
    command.envs(env.iter().copied());
    command.args(["run", job.to_str().unwrap()]).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(ms) = pause_ms {
        command.env(PAUSE, ms.to_string());
    }
    command.spawn().unwrap()
}

/// The hidden siblings a switch builds beside `out`.
fn siblings(out: &Path) -> Vec<PathBuf> {
    let name = format!(".{}.graphflat-", out.file_name().unwrap().to_string_lossy());
    let mut found: Vec<PathBuf> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&name))
        .collect();
    found.sort();
    found
}

/// Waits until a switch of `out` is paused before its exchange (its version holds the manifest).
fn wait_for_the_switch(out: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !siblings(out).iter().any(|s| s.join("_manifest.parquet").exists()) {
        assert!(child.try_wait().unwrap().is_none(), "the job ended before its switch");
        assert!(Instant::now() < deadline, "no switch began");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, name: &str) {
    Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap();
}

/// The manifest `out` holds, read as this project's readers read it.
fn read_committed(out: &Path) -> ::tables::commit::Manifest {
    let place = ::tables::Place::parse(out.to_str().unwrap(), &schemas::StorageConfig::default()).unwrap();
    local_io().block_on(::tables::commit::read_manifest(&place)).unwrap().unwrap()
}

fn manifest_run(out: &Path) -> String {
    read_committed(out).run
}

/// Readers in a loop (pandas, DuckDB's glob) while eight overwrites alternate two versions of
/// different sizes: every read holds one version's rows exactly (no repeated root, a count of
/// one of the two), or is a "not found" of a file the switch took away between the reader's
/// listing and its opening; never a mix.
#[test]
fn readers_see_one_version_while_a_job_replaces_it() {
    let Some(python) = python() else { return };
    let dir = scratch("switch-readers");
    let graph = dir.join("graph");
    generate(&graph, 3000, 5, 8, 1);
    let out = dir.join("flat");
    let (all, train) = (job(&dir, &graph, &out, true, "all"), job(&dir, &graph, &out, false, "train"));
    run_ok(&all, &[]);
    let rows_all = manifest_rows(&out);
    run_ok(&train, &[]);
    let rows_train = manifest_rows(&out);
    assert_ne!(rows_all, rows_train);
    let stop = dir.join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/read_loop.py");
    let mut readers = Command::new(python)
        .args([script.to_str().unwrap(), out.to_str().unwrap(), "root_id", stop.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(readers.stdout.take().unwrap()));
    // The readers' imports take seconds: the overwrites start once they read.
    assert!(lines.next().unwrap().unwrap().contains("ready"));
    for i in 0..8 {
        run_ok(if i % 2 == 0 { &all } else { &train }, &[]);
    }
    std::fs::write(&stop, b"").unwrap();
    let lines: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(readers.wait().unwrap().success());
    let (mut reads, mut not_found, mut straddled) = (0, 0, 0);
    for line in &lines {
        let read: serde_json::Value = serde_json::from_str(line).unwrap();
        if read["straddled"] == true {
            // Listed in one version, its files looked up in the next: fewer files, or an
            // error, but never two versions' rows.
            if let Some(rows) = read["rows"].as_u64() {
                assert_eq!(read["distinct"].as_u64(), Some(rows), "a mix: {line}");
                assert!(rows <= rows_all.max(rows_train), "a mix: {line}");
            }
            straddled += 1;
        } else if let Some(rows) = read["rows"].as_u64() {
            assert!(rows == rows_all || rows == rows_train, "a mix: {line} (versions of {rows_all} and {rows_train})");
            assert_eq!(read["distinct"].as_u64(), Some(rows), "a mix: {line}");
            reads += 1;
        } else {
            assert_eq!(read["not_found"], true, "a reader failed otherwise: {line}");
            not_found += 1;
        }
    }
    eprintln!("{reads} whole reads, {not_found} not found, {straddled} with a switch during the read");
    assert!(reads > 0, "no read finished:\n{}", lines.join("\n"));
    assert!(siblings(&out).is_empty(), "{:?}", siblings(&out));
}

fn manifest_rows(out: &Path) -> u64 {
    read_committed(out).rows
}

/// SIGTERM (and SIGINT) inside the switch: it finishes, the job (whose last stage it was) exits
/// 0 saying so, and every reader reads the new version. Before the switch: 143 (130), the
/// message says nothing was committed, and the old version is whole.
#[test]
fn a_stop_inside_the_switch_finishes_it_and_one_before_commits_nothing() {
    let dir = scratch("switch-stop");
    let graph = dir.join("graph");
    generate(&graph, 2000, 5, 8, 1);
    let out = dir.join("flat");
    let (all, train) = (job(&dir, &graph, &out, true, "all"), job(&dir, &graph, &out, false, "train"));
    run_ok(&all, &[]);
    // A graph that takes long enough to flatten to be stopped midway.
    let larger = dir.join("larger");
    generate(&larger, 60_000, 8, 16, 2);
    let long = job(&dir, &larger, &out, true, "long");
    for (signal_name, code) in [("TERM", 143), ("INT", 130)] {
        let before = manifest_run(&out);
        // The signal thread slowed as a loaded machine slows it: the job, whose switch ends
        // meanwhile, still ends with the stop's message and code.
        let mut child = spawn_with(&train, Some(1500), &[(SAY_DELAY, "500")]);
        wait_for_the_switch(&out, &mut child);
        signal(&child, signal_name);
        let ended = child.wait_with_output().unwrap();
        assert_eq!(ended.status.code(), Some(0), "{}", text(&ended));
        let said = text(&ended);
        assert!(said.contains("[flatten] committed") && said.contains("finished"), "{said}");
        assert_ne!(manifest_run(&out), before, "the switch finished");
        assert!(siblings(&out).is_empty(), "the replaced version stays: {:?}", siblings(&out));
        assert_every_reader_reads_the_manifest(&[&out]);

        // Before the switch: nothing committed, the old version whole.
        let before = manifest_run(&out);
        let mut child = spawn(&long, None);
        // Once the run holds its output (its marker is there), well before its switch.
        while !out.join("_temporary").exists() {
            assert!(child.try_wait().unwrap().is_none(), "the job ended before the signal");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(siblings(&out).is_empty(), "the switch began before the signal");
        signal(&child, signal_name);
        let ended = child.wait_with_output().unwrap();
        assert_eq!(ended.status.code(), Some(code), "{}", text(&ended));
        assert!(text(&ended).contains("[flatten] committed nothing"), "{}", text(&ended));
        assert_eq!(manifest_run(&out), before);
        assert!(!out.join("_temporary").exists(), "the stopped run's temporary files stay");
        assert_every_reader_reads_the_manifest(&[&out]);
    }
    // What the stopped runs left beside the output goes with the next command that opens it.
    graphflat_ok(&["inspect", out.to_str().unwrap()]);
    assert!(siblings(&out).is_empty(), "{:?}", siblings(&out));
}

/// SIGTERM inside the switch of a stage that is not the job's last, its message held back as a
/// loaded machine holds it: the switch finishes, no stage starts after it, and the stop says
/// so, exit 143 (the next stage used to begin, and the stop was said to be that stage's).
#[test]
fn a_stop_inside_a_switch_before_the_last_stage_starts_no_stage_after_it() {
    let dir = scratch("switch-stop-stages");
    let graph = dir.join("graph");
    generate(&graph, 2000, 5, 8, 1);
    let (flat, model) = (dir.join("flat"), dir.join("model"));
    let flatten = Job::flatten(&graph, &flat).key("fanouts", vec![4, 4]);
    let path = flatten.and(Job::train(&flat, &model).key("epochs", 1)).write(&dir, "two-stages");
    let mut child = spawn_with(&path, Some(1500), &[(SAY_DELAY, "300")]);
    wait_for_the_switch(&flat, &mut child);
    signal(&child, "TERM");
    let ended = child.wait_with_output().unwrap();
    let said = text(&ended);
    assert_eq!(ended.status.code(), Some(143), "{said}");
    assert!(said.contains("after [flatten] committed") && said.contains("the stages after it did not run"), "{said}");
    assert!(!said.contains("[train]") && !model.join("_SUCCESS").exists(), "the training ran: {said}");
    assert_every_reader_reads_the_manifest(&[&flat]);
}

/// kill -9 at random moments of a flatten, half of them inside the switch: the output is one
/// whole version every time (every reader reads exactly the manifest's rows, `_SUCCESS` beside
/// it), and the next run settles what the killed one left and commits.
#[test]
fn a_kill_at_any_moment_leaves_one_whole_version() {
    let dir = scratch("switch-kill");
    let graph = dir.join("graph");
    generate(&graph, 2000, 5, 8, 1);
    let out = dir.join("flat");
    let (all, train) = (job(&dir, &graph, &out, true, "all"), job(&dir, &graph, &out, false, "train"));
    run_ok(&all, &[]);
    let started = Instant::now();
    run_ok(&train, &[]);
    let whole = started.elapsed();
    for i in 0..8u32 {
        let inside = i % 2 == 1;
        let mut child = spawn(if i % 4 < 2 { &all } else { &train }, inside.then_some(1000));
        if inside {
            wait_for_the_switch(&out, &mut child);
        } else {
            // A moment of the run drawn from the test's index: spread over the whole run.
            std::thread::sleep(whole.mul_f64(f64::from(i) / 8.0));
        }
        signal(&child, "KILL");
        let _ = child.wait();
        assert!(out.join("_SUCCESS").exists() && out.join("_manifest.parquet").exists(), "kill {i}");
        // The next command that opens the output settles what the killed run left (its
        // temporary files, which polars would read, and its version beside the output).
        graphflat_ok(&["inspect", out.to_str().unwrap()]);
        assert!(siblings(&out).is_empty(), "kill {i}: {:?}", siblings(&out));
        // But a run killed before its marker was written leaves a directory that a run writing
        // its marker right now would leave too: it stays for a minute (tables::lease::STALE_AFTER),
        // and holds nothing a reader reads.
        if let Ok(runs) = std::fs::read_dir(out.join("_temporary")) {
            for run in runs {
                let run = run.unwrap().path();
                let files: Vec<_> = std::fs::read_dir(&run).unwrap().map(|f| f.unwrap().file_name()).collect();
                let unmarked = files.iter().all(|f| f.to_string_lossy().starts_with("run.json#"));
                assert!(unmarked, "kill {i}: {} holds {files:?}", run.display());
            }
        }
        assert_every_reader_reads_the_manifest(&[&out]);
    }
    run_ok(&all, &[]);
    assert!(siblings(&out).is_empty(), "{:?}", siblings(&out));
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// An overwrite keeps what this project did not write, folders inside a model's folders
/// included, and the directory's owner, group and mode.
#[test]
fn an_overwrite_keeps_what_it_did_not_write_and_the_directorys_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = scratch("switch-keeps");
    let graph = dir.join("graph");
    generate(&graph, 300, 4, 8, 1);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j);
    let model = dir.join("model");
    let train = Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).key("overwrite", true).write(&dir, "train");
    run_ok(&train, &[]);
    std::fs::create_dir_all(model.join("checkpoints/mine")).unwrap();
    std::fs::write(model.join("checkpoints/mine/notes.txt"), b"keep").unwrap();
    std::fs::create_dir_all(model.join("_mine")).unwrap();
    std::fs::set_permissions(&model, std::fs::Permissions::from_mode(0o2775)).unwrap();
    // A group and owner of their own, where this process may give them (as root).
    let owned = std::os::unix::fs::chown(&model, Some(65534), Some(65534)).is_ok();
    let before = std::fs::metadata(&model).unwrap();
    run_ok(&train, &[]);
    assert_eq!(std::fs::read(model.join("checkpoints/mine/notes.txt")).unwrap(), b"keep");
    assert!(model.join("_mine").is_dir());
    let after = std::fs::metadata(&model).unwrap();
    assert_eq!(after.mode() & 0o7777, before.mode() & 0o7777);
    if owned {
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    }
}

/// A training reading records while flattens replace them, again and again: it reads the
/// version it opened to the end and exits 0 (it held that version, kept beside the output
/// while it read), and the next command that opens the output removes the kept version.
#[test]
fn a_training_reads_the_records_it_opened_while_they_are_replaced() {
    let dir = scratch("switch-held");
    let graph = dir.join("graph");
    generate(&graph, 3000, 5, 8, 1);
    let out = dir.join("flat");
    let (all, train) = (job(&dir, &graph, &out, true, "all"), job(&dir, &graph, &out, false, "train"));
    run_ok(&all, &[]);
    let training = Job::train(&out, dir.join("model")).key("epochs", 400).key("patience", 0).key("hidden", 8);
    // Its log goes to a file: a pipe nobody reads would stop it once full.
    let log = dir.join("training.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut trainer = graphflat()
        .args(["run", training.write(&dir, "training").to_str().unwrap()])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let (mut replaced, mut kept_seen) = (0, false);
    for i in 0..40 {
        if trainer.try_wait().unwrap().is_some() {
            break;
        }
        run_ok(if i % 2 == 0 { &train } else { &all }, &[]);
        replaced += 1;
        kept_seen |= siblings(&out).iter().any(|s| s.to_string_lossy().ends_with(".kept"));
    }
    let trained = trainer.wait().unwrap();
    assert!(trained.success(), "{trained}: {}", std::fs::read_to_string(&log).unwrap());
    assert!(kept_seen, "no flatten replaced the records while the training read them ({replaced} ran)");
    graphflat_ok(&["inspect", out.to_str().unwrap()]);
    assert_eq!(siblings(&out), Vec::<PathBuf>::new(), "the kept version goes once its reader ended");
}

/// The two processes of a training open the records on either side of a flatten that replaces
/// them: each holds a whole version, but not the same one; both end with 75 naming both runs
/// (they once panicked on a plan of two versions' units, and the survivor hung).
#[test]
fn processes_that_opened_two_versions_of_the_records_both_exit_75() {
    let dir = scratch("switch-two-versions");
    let graph = dir.join("graph");
    generate(&graph, 3000, 5, 8, 1);
    let out = dir.join("flat");
    let (all, train) = (job(&dir, &graph, &out, true, "all"), job(&dir, &graph, &out, false, "train"));
    run_ok(&all, &[]);
    let first = manifest_run(&out);
    let learn = Job::loopback(2)
        .and(Job::train(&out, dir.join("model")).key("epochs", 2).key("hidden", 8))
        .write(&dir, "learn");
    let start = |p: &str| {
        graphflat()
            .args(["run", learn.to_str().unwrap(), "--process", p])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut early = start("0");
    // Process 0 opens (and holds) the records before it waits for its peer.
    wait_until_it_holds(&mut early, &out);
    run_ok(&train, &[]);
    let second = manifest_run(&out);
    let late = start("1");
    for child in [early, late] {
        let said = child.wait_with_output().unwrap();
        assert_fails(&said, 75, &["opened different versions of these records", &first, &second]);
    }
}

/// Waits until `child` has the directory `dir` open (a reader's hold, `tables::pin`).
fn wait_until_it_holds(child: &mut Child, dir: &Path) {
    let dir = std::fs::canonicalize(dir).unwrap();
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let holds = || {
        std::fs::read_dir(&fds)
            .is_ok_and(|d| d.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == dir)))
    };
    while !holds() {
        assert!(child.try_wait().unwrap().is_none(), "the process ended before it opened {}", dir.display());
        assert!(Instant::now() < deadline, "the process never opened {}", dir.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A run killed inside its switch before the exchange leaves its built version beside the
/// output; a user who then removes the output must not see that version, never committed, put
/// in its place by the next command.
#[test]
fn a_killed_runs_version_never_takes_a_removed_outputs_place() {
    let dir = scratch("switch-unbegun");
    let graph = dir.join("graph");
    generate(&graph, 2000, 5, 8, 1);
    let out = dir.join("flat");
    let train = job(&dir, &graph, &out, false, "train");
    let mut child = spawn(&train, Some(3000));
    wait_for_the_switch(&out, &mut child);
    signal(&child, "KILL");
    let _ = child.wait();
    std::fs::remove_dir_all(&out).unwrap();
    let inspected = graphflat().args(["inspect", out.to_str().unwrap()]).output().unwrap();
    assert!(!inspected.status.success(), "{}", text(&inspected));
    assert!(!out.exists(), "the killed run's version was put in place: {}", text(&inspected));
    assert!(siblings(&out).is_empty(), "{:?}", siblings(&out));
}

/// A graph's tables are one whole: `generate` writes them under one run and commits them
/// together, and a job's `[generate]` that finds them of two runs (a generate stopped between
/// its tables' switches) generates the whole graph again instead of skipping a graph that
/// never existed; so does one that finds only some of the tables, all of one generate.
#[test]
fn a_graph_of_two_runs_is_generated_again_not_skipped() {
    let dir = scratch("switch-graph-pair");
    let graph = dir.join("g");
    let job = write_job(&dir, "gen", &format!("[generate]\noutput = \"{}\"\nnodes = 400\n", graph.display()));
    run_ok(&job, &[]);
    let (nodes, edges) = (graph.join("nodes"), graph.join("edges"));
    assert_eq!(manifest_run(&nodes), manifest_run(&edges), "one run writes both tables");
    assert!(text(&run(&job, &[])).contains("already holds a graph; skipping"));
    // The edges of another run, as a generate stopped between its two switches leaves them.
    let other = dir.join("other");
    generate(&other, 300, 4, 8, 1);
    std::fs::remove_dir_all(&edges).unwrap();
    std::fs::rename(other.join("edges"), &edges).unwrap();
    assert_ne!(manifest_run(&nodes), manifest_run(&edges));
    // A stage reading it (as one opening the graph between the two switches would) refuses
    // to mix two graphs, with a retry (75); tables of two graphs named on purpose are read.
    let flat = dir.join("flat");
    let mixed = run(&Job::flatten(&graph, &flat).write(&dir, "mixed"), &[]);
    assert_fails(&mixed, 75, &["written as one graph", "write the graph again"]);
    assert!(!flat.join("_SUCCESS").exists(), "nothing was committed");
    let third = dir.join("third");
    generate(&third, 300, 4, 8, 2);
    let chosen = Job::table_named("flatten")
        .key("nodes", location(&nodes))
        .key("edges", location(third.join("edges")))
        .key("output", location(&flat));
    let read = run(&chosen.write(&dir, "chosen"), &[]);
    assert!(read.status.success(), "{}", text(&read));
    let ended = run(&job, &[]);
    assert!(ended.status.success() && text(&ended).contains("generating the whole graph again"), "{}", text(&ended));
    assert_eq!(manifest_run(&nodes), manifest_run(&edges));
    assert!(text(&run(&job, &[])).contains("already holds a graph; skipping"));
    // Only the node table, as the first generate into a directory stopped between its two
    // switches leaves it: generated again too, not refused for want of overwrite.
    std::fs::remove_dir_all(&edges).unwrap();
    let ended = run(&job, &[]);
    assert!(ended.status.success() && text(&ended).contains("generating the whole graph again"), "{}", text(&ended));
    assert_eq!(manifest_run(&nodes), manifest_run(&edges));
}

/// Two processes, SIGTERM to process 0 inside the job's last switch: the switch finishes, and
/// process 0 stays for the job's own end, so process 1 learns of the commit and both exit 0
/// (process 1 used to lose its peer and fail, 75, a job that had committed).
#[test]
fn a_stop_inside_the_last_switch_of_two_processes_ends_both_as_committed() {
    let dir = scratch("switch-stop-cluster");
    let graph = dir.join("graph");
    generate(&graph, 2000, 5, 8, 1);
    let out = dir.join("flat");
    let page = dir.join("report.html");
    let flatten = Job::flatten(&graph, &out).key("fanouts", vec![4, 4]);
    let job = Job::loopback(2).and(flatten).and(Job::report(&page)).write(&dir, "two");
    let spawn = |p: usize| {
        graphflat()
            .args(["run", job.to_str().unwrap(), "--process", &p.to_string()])
            .env(PAUSE, "1500")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut first, second) = (spawn(0), spawn(1));
    wait_for_the_switch(&out, &mut first);
    signal(&first, "TERM");
    for (p, child) in [(0, first), (1, second)] {
        let ended = child.wait_with_output().unwrap();
        assert_eq!(ended.status.code(), Some(0), "process {p}:\n{}", text(&ended));
    }
    assert!(siblings(&out).is_empty(), "{:?}", siblings(&out));
    assert!(!page.exists(), "a stopped job wrote its report");
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// Two trainings with overwrite into one model, started together, again and again: the
/// trainer writes its checkpoints and metrics into the output while the other's commit moves
/// that output's folders into its next version. Each ends 0, or 75 when the other's switch
/// took its staged files away ("run again"); never 66 or 73, a file "not found" or "cannot
/// write" that a retry would not fix (5 tries in 100 once were).
#[test]
fn two_trainings_into_one_model_at_once_end_committed_or_retry() {
    let dir = scratch("switch-two-trainings");
    let graph = dir.join("graph");
    generate(&graph, 3000, 5, 8, 1);
    let flat = dir.join("flat");
    run_ok(&job(&dir, &graph, &flat, true, "flat"), &[]);
    let model = dir.join("model");
    let training = Job::cluster()
        .key("workers", 2)
        .and(Job::train(&flat, &model).key("epochs", 3).key("checkpoint_every", 1).key("overwrite", true))
        .write(&dir, "training");
    for round in 0..40 {
        let other = spawn(&training, None);
        let mine = run(&training, &[]);
        let theirs = other.wait_with_output().unwrap();
        for out in [&mine, &theirs] {
            let ended = out.status.code();
            let retry = ended == Some(75) && text(out).contains("two runs into one output at once");
            assert!(ended == Some(0) || retry, "round {round}: {ended:?}: {}", text(out));
        }
    }
    graphflat_ok(&["inspect", model.to_str().unwrap()]);
    assert_eq!(siblings(&model), Vec::<PathBuf>::new(), "no version is left beside the model");
}
