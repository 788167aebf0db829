//! The one rule of every command that writes (`tables::guard`): a directory holding a committed
//! output of another kind is never replaced or written into, with or without overwrite (exit
//! 73, naming both kinds); the same kind only with overwrite; a job naming one output twice is
//! refused before anything runs (64). Every writer here runs over every kind of output, and
//! the directory it was pointed at is compared, file by file, with what it held before. The
//! Python package's rule (`graphflat.guard`) is held to the same words.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

/// Every file under `dir` with its bytes: what "untouched" is compared on.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// One committed output of each kind, made by the command or stage that writes it.
struct Outputs {
    dir: Scratch,
    /// The graph the stages under test read, apart from every output.
    inputs: PathBuf,
    kinds: Vec<(&'static str, PathBuf)>,
}

fn outputs() -> Outputs {
    let dir = scratch("guard");
    let graph = dir.join("graph");
    generate(&graph, 300, 4, 8, 1);
    let inputs = dir.join("inputs");
    generate(&inputs, 300, 4, 8, 2);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j.key("fanouts", vec![3, 3]));
    let model = dir.join("model");
    run_ok(&Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).write(&dir, "train"), &[]);
    let scores = dir.join("scores");
    run_ok(&Job::infer(&graph, &model, &scores).write(&dir, "infer"), &[]);
    let parts = dir.join("parts");
    let partition = Job::table_named("partition")
        .key("nodes", location(graph.join("nodes")))
        .key("edges", location(graph.join("edges")))
        .key("output", location(&parts));
    run_ok(&partition.write(&dir, "partition"), &[]);
    let split = dir.join("split");
    graphflat_ok(&["split-edges", "--edges", graph.join("edges").to_str().unwrap(), "--out", split.to_str().unwrap()]);
    let mut kinds = vec![
        ("a generated graph table", graph.join("nodes")),
        ("a record set", flat),
        ("a model", model),
        ("scores", scores),
        ("a partition table", parts),
        ("a split edge table", split),
    ];
    if let Some(cora) = cora() {
        let imported = dir.join("imported");
        graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", imported.to_str().unwrap()]);
        kinds.push(("an imported graph table", imported.join("nodes")));
    }
    Outputs { dir, inputs, kinds }
}

/// A command that writes, pointed at `target` with overwrite: its kind, its inputs, and how
/// it runs.
struct Writer {
    kind: &'static str,
    inputs: Vec<PathBuf>,
    run: Box<dyn Fn(&Path) -> Output>,
}

fn writers(o: &Outputs) -> Vec<Writer> {
    let inputs = o.inputs.clone();
    let mut all = vec![
        Writer {
            kind: "a generated graph table",
            inputs: Vec::new(),
            run: Box::new(|t| bounded(&["generate", "--out", t.to_str().unwrap(), "--nodes", "50", "--overwrite"])),
        },
        Writer {
            kind: "a split edge table",
            inputs: vec![inputs.join("edges")],
            run: Box::new(move |t| {
                let edges = inputs.join("edges");
                let args = ["split-edges", "--edges", edges.to_str().unwrap(), "--out", t.to_str().unwrap()];
                bounded(&[&args[..], &["--overwrite"]].concat())
            }),
        },
    ];
    all.extend(stage_writers(o));
    if let Some(cora) = cora() {
        all.push(Writer {
            kind: "an imported graph table",
            inputs: vec![cora.clone()],
            run: Box::new(move |t| {
                bounded(&["import", "ogb", cora.to_str().unwrap(), "--out", t.to_str().unwrap(), "--overwrite"])
            }),
        });
    }
    all
}

/// The stages' writers: `[flatten]`, `[train]`, `[infer]` and `[partition]`, each over the
/// inputs `o` holds and with `overwrite`.
fn stage_writers(o: &Outputs) -> Vec<Writer> {
    let (dir, inputs) = (o.dir.to_path_buf(), o.inputs.clone());
    let records = o.kinds[1].1.clone();
    let model = o.kinds[2].1.clone();
    let job = move |name: &str, job: Job| run(&job.write(&dir, name), &[]);
    let (j1, j2, j3, j4) = (job.clone(), job.clone(), job.clone(), job);
    let (i1, i2, i3) = (inputs.clone(), inputs.clone(), inputs.clone());
    let (records2, model2) = (records.clone(), model.clone());
    let graph = [inputs.join("nodes"), inputs.join("edges")];
    vec![
        Writer {
            kind: "a record set",
            inputs: graph.to_vec(),
            run: Box::new(move |t| j1("w-flatten", Job::flatten(&i1, t).key("overwrite", true))),
        },
        Writer {
            kind: "a model",
            inputs: vec![records],
            run: Box::new(move |t| j2("w-train", Job::train(&records2, t).key("epochs", 1).key("overwrite", true))),
        },
        Writer {
            kind: "scores",
            inputs: [graph.to_vec(), vec![model]].concat(),
            run: Box::new(move |t| j3("w-infer", Job::infer(&i2, &model2, t).key("overwrite", true))),
        },
        Writer {
            kind: "a partition table",
            inputs: graph.to_vec(),
            run: Box::new(move |t| {
                let partition = Job::table_named("partition")
                    .key("nodes", location(i3.join("nodes")))
                    .key("edges", location(i3.join("edges")))
                    .key("output", location(t))
                    .key("overwrite", true);
                j4("w-partition", partition)
            }),
        },
    ]
}

/// The directory a writer writes for `target`: `generate` and `import` write `nodes/` and
/// `edges/` inside it.
fn written(writer: &Writer, target: &Path) -> PathBuf {
    match writer.kind {
        "a generated graph table" | "an imported graph table" => target.join("nodes"),
        _ => target.to_path_buf(),
    }
}

/// Every writer, with overwrite, over every other kind's output, over a folder inside it,
/// and over a directory holding it (for the writers of that directory itself): refused (73, or 64 where the output is the writer's own
/// input), and the output is byte for byte what it was. Over its own kind, overwrite replaces.
#[test]
fn no_writer_replaces_or_writes_into_another_kind_of_output() {
    let o = outputs();
    let writers = writers(&o);
    for writer in &writers {
        for (kind, output) in &o.kinds {
            let mut before = snapshot(output);
            let around = output.parent().unwrap().to_path_buf();
            let targets = [output.clone(), output.join("inside"), around];
            for target in targets {
                let own = *kind == writer.kind && written(writer, &target) == *output;
                // generate and import write nodes/ and edges/ inside their directory: beside
                // another output there is where they belong (data/quickstart/{nodes,flat}).
                if !own && written(writer, &target) != target && !target.starts_with(output) {
                    continue;
                }
                let out = (writer.run)(&target);
                let what = format!("{} over {} at {}:\n{}", writer.kind, kind, target.display(), text(&out));
                if own {
                    assert!(out.status.success(), "the same kind with overwrite replaces: {what}");
                    before = snapshot(output);
                    continue;
                }
                let input = writer.inputs.iter().any(|i| i.starts_with(&target) || target.starts_with(i));
                let code = out.status.code();
                assert!(code == Some(73) || (input && code == Some(64)), "{what}");
                if code == Some(73) {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(stderr.contains(kind) && stderr.contains("choose another output directory"), "{what}");
                }
                assert_eq!(snapshot(output).keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>(), "{what}");
                assert!(snapshot(output) == before, "{what}: the bytes changed");
                assert!(!output.join("inside").exists(), "{what}");
            }
        }
    }
}

/// The same kind without overwrite: refused (73) with the way to say overwrite, and kept.
#[test]
fn the_same_kind_is_replaced_only_with_overwrite() {
    let dir = scratch("guard-same-kind");
    let graph = dir.join("graph");
    generate(&graph, 200, 4, 8, 1);
    let before = snapshot(&graph);
    let again = bounded(&["generate", "--out", graph.to_str().unwrap(), "--nodes", "50"]);
    assert_fails(&again, 73, &["already holds a generated graph table", "--overwrite"]);
    assert!(snapshot(&graph) == before);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j);
    let before = snapshot(&flat);
    let out = run(&Job::flatten(&graph, &flat).write(&dir, "again"), &[]);
    assert_fails(&out, 73, &["already holds a record set", "overwrite = true"]);
    assert!(snapshot(&flat) == before);
}

/// Two stages of one job naming one directory, or one inside the other: 64 before anything
/// runs (the first stage writes nothing).
#[test]
fn a_job_whose_stages_share_an_output_is_refused_before_it_runs() {
    let dir = scratch("guard-one-output-twice");
    let graph = dir.join("graph");
    generate(&graph, 200, 4, 8, 1);
    for (name, flat_output) in [("same", dir.join("x")), ("inside", dir.join("x/flat"))] {
        let partition = Job::table_named("partition")
            .key("nodes", location(graph.join("nodes")))
            .key("edges", location(graph.join("edges")))
            .key("output", location(dir.join("x")))
            .key("overwrite", true);
        let job = partition.and(Job::flatten(&graph, &flat_output).key("overwrite", true));
        let out = run(&job.write(&dir, name), &[]);
        assert_fails(&out, 64, &["[partition] output", "[flatten] output", "a directory of its own"]);
        assert!(!dir.join("x").exists(), "{name}: nothing ran");
    }
    // A symlink, relative or through another, to the directory an earlier stage will make.
    std::os::unix::fs::symlink("x", dir.join("to-x")).unwrap();
    std::os::unix::fs::symlink(dir.join("to-x"), dir.join("to-to-x")).unwrap();
    for (name, link) in [("symlink", "to-x"), ("symlinks", "to-to-x/flat")] {
        let partition = Job::table_named("partition")
            .key("nodes", location(graph.join("nodes")))
            .key("edges", location(graph.join("edges")))
            .key("output", location(dir.join("x")));
        let job = partition.and(Job::flatten(&graph, dir.join(link)));
        let out = run(&job.write(&dir, name), &[]);
        assert_fails(&out, 64, &["[partition] output", "[flatten] output", "a directory of its own"]);
        assert!(!dir.join("x").exists(), "{name}: nothing ran");
    }
}

/// The Python package's rule says what the binary says, word for word, on the same cases.
#[test]
fn python_refuses_in_the_binarys_words() {
    let Some(python) = python() else { return };
    let o = outputs();
    let flat = o.kinds[1].1.clone();
    let model = o.kinds[2].1.clone();
    let graph = o.kinds[0].1.parent().unwrap().to_path_buf();
    let cases: Vec<(&str, PathBuf, Output)> = vec![
        (
            "infer",
            flat.clone(),
            run(&Job::infer(&o.inputs, &model, &flat).key("overwrite", true).write(&o.dir, "p1"), &[]),
        ),
        (
            "flatten",
            model.clone(),
            run(&Job::flatten(&o.inputs, &model).key("overwrite", true).write(&o.dir, "p2"), &[]),
        ),
        ("flatten", flat.clone(), run(&Job::flatten(&o.inputs, &flat).write(&o.dir, "p3"), &[])),
        (
            "flatten",
            graph.clone(),
            run(&Job::flatten(&o.inputs, &graph).key("overwrite", true).write(&o.dir, "p4"), &[]),
        ),
        ("infer", flat.join("m"), run(&Job::infer(&o.inputs, &model, flat.join("m")).write(&o.dir, "p5"), &[])),
    ];
    for (asked, target, out) in cases {
        let overwrite = asked != "flatten" || target != flat;
        let script = format!(
            "import sys\nfrom graphflat.guard import guard, CommittedError\ntry:\n    guard(sys.argv[1], '{asked}', {})\n\
             except CommittedError as e:\n    print(e)\n",
            if overwrite { "True" } else { "False" }
        );
        let said = Command::new(python)
            .args(["-c", &script, target.to_str().unwrap()])
            .env("PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"))
            .output()
            .unwrap();
        let words = String::from_utf8_lossy(&said.stdout).trim().to_owned();
        assert!(!words.is_empty(), "Python allowed {asked} over {}: {}", target.display(), text(&said));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&words),
            "{asked} over {}:\n the binary: {stderr}\n Python:     {words}",
            target.display()
        );
    }
}

/// `report` writes a page into a model's directory, and never into a table's directory nor a
/// folder inside any committed output.
#[test]
fn a_report_never_goes_into_another_output() {
    let dir = scratch("guard-report");
    let graph = dir.join("graph");
    generate(&graph, 200, 4, 8, 1);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j);
    let model = dir.join("model");
    run_ok(&Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).write(&dir, "train"), &[]);
    let before = snapshot(&flat);
    for page in [flat.join("report.html"), flat.join("sub/report.html"), model.join("sub/report.html")] {
        let out = bounded(&["report", model.to_str().unwrap(), "--out", page.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(73), "{}:\n{}", page.display(), text(&out));
        assert!(!page.exists());
    }
    assert!(snapshot(&flat) == before);
    graphflat_ok(&["report", model.to_str().unwrap(), "--out", model.join("report.html").to_str().unwrap()]);
}

/// Symlinks do not lead past the rule: an output that is a symlink into a committed output,
/// and one holding a symlink to one (pandas follows it), are refused like the real places.
#[test]
fn symlinks_lead_no_writer_into_another_output() {
    let dir = scratch("guard-symlinks");
    let graph = dir.join("graph");
    generate(&graph, 200, 4, 8, 1);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j);
    let before = snapshot(&flat);
    std::fs::create_dir(flat.join("extra")).unwrap();
    std::os::unix::fs::symlink(flat.join("extra"), dir.join("into")).unwrap();
    std::fs::create_dir(dir.join("wrap")).unwrap();
    std::os::unix::fs::symlink(&flat, dir.join("wrap/inner")).unwrap();
    let edges = graph.join("edges");
    for (target, words) in [("into", "lies inside"), ("wrap", "which is a record set")] {
        let out = dir.join(target);
        let args = ["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap(), "--overwrite"];
        assert_fails(&bounded(&args), 73, &[words]);
    }
    std::fs::remove_dir(flat.join("extra")).unwrap();
    assert!(snapshot(&flat) == before);
}

/// An output of another kind committed while a run wrote (the guard passed at the run's
/// start) is not replaced at the commit either, with overwrite: 73, and the other output
/// stays.
#[test]
fn another_kind_committed_meanwhile_is_not_replaced() {
    let dir = scratch("guard-meanwhile");
    let (small, large) = (dir.join("small"), dir.join("large"));
    generate(&small, 300, 4, 8, 1);
    generate(&large, 60_000, 8, 16, 2);
    let flat = flatten(&dir, &small, "flat", &[], |j| j);
    let x = dir.join("x");
    let slow = Job::flatten(&large, &x).key("overwrite", true).write(&dir, "slow");
    let mut child =
        graphflat().args(["run", slow.to_str().unwrap()]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    while !x.join("_temporary").exists() {
        assert!(child.try_wait().unwrap().is_none(), "the flatten ended before the model came");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    run_ok(&Job::train(&flat, &x).key("epochs", 1).key("hidden", 8).key("overwrite", true).write(&dir, "train"), &[]);
    let model = snapshot(&x);
    let ended = child.wait_with_output().unwrap();
    assert_fails(&ended, 73, &["holds a model", "committed while this run wrote"]);
    let after = snapshot(&x);
    for (name, bytes) in &model {
        if !name.starts_with("_temporary") {
            assert!(after.get(name) == Some(bytes), "{} changed", name.display());
        }
    }
}

/// A directory named as a version the switch keeps beside an output (a hidden sibling, its
/// `.aside` or `.kept`) is never an output: the next command over that output would remove it.
/// Nor one named as a stage's own place beside an output (a refresh's digests, a kept graph),
/// which that output's next refresh would replace. Python's guard says the same words.
#[test]
fn no_writer_writes_a_directory_named_as_a_kept_version() {
    let o = outputs();
    let id = ::tables::names::new_run_id();
    let version = "is named as a version graphflat keeps beside an output";
    let own = "is named as a place graphflat keeps for itself beside an output";
    let names = [("", version), (".aside", version), (".kept", version), ("state", own), ("nodes-a", own)];
    for (suffix, words) in names {
        let name = if words == version {
            format!(".flat.graphflat-{id}{suffix}")
        } else {
            format!(".flat.graphflat-{suffix}")
        };
        let target = o.dir.join(name);
        let out = run(&Job::flatten(&o.inputs, &target).key("overwrite", true).write(&o.dir, "kept"), &[]);
        assert_fails(&out, 73, &[words]);
        assert!(!target.exists(), "{}", target.display());
        let Some(python) = python() else { continue };
        let script = "import sys\nfrom graphflat.guard import guard, CommittedError\ntry:\n    guard(sys.argv[1], \
                      'flatten', True)\nexcept CommittedError as e:\n    print(e)\n";
        let said = Command::new(python)
            .args(["-c", script, target.to_str().unwrap()])
            .env("PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("python"))
            .output()
            .unwrap();
        let words = String::from_utf8_lossy(&said.stdout).trim().to_owned();
        assert!(!words.is_empty() && String::from_utf8_lossy(&out.stderr).contains(&words), "Python: {words}");
    }
}

/// Two runs at once, one writing inside the other's output: both pass the first look (neither
/// has committed), and the commit asks again, so the second to commit is refused (73) and
/// readers of the outer directory never read both outputs' rows as one. The other way round,
/// a run writing around a run in progress is refused at its first look: the folder there is
/// not its own, and a table's directory keeps none.
#[test]
fn of_two_runs_one_inside_the_other_the_second_to_commit_is_refused() {
    let dir = scratch("guard-nested");
    let (small, large) = (dir.join("small"), dir.join("large"));
    generate(&small, 300, 4, 8, 1);
    generate(&large, 60_000, 8, 16, 2);
    let (outer, inner) = (dir.join("nest"), dir.join("nest").join("inner"));
    for (slow_out, quick_out) in [(&outer, &inner), (&inner, &outer)] {
        let _ = std::fs::remove_dir_all(&outer);
        let slow = Job::flatten(&large, slow_out).write(&dir, "slow");
        let mut child =
            graphflat().args(["run", slow.to_str().unwrap()]).stderr(std::process::Stdio::piped()).spawn().unwrap();
        while !slow_out.join("_temporary").exists() {
            assert!(child.try_wait().unwrap().is_none(), "the slow run ended before the quick one");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let quick = Job::flatten(&small, quick_out).key("overwrite", true).write(&dir, "quick");
        if quick_out == &outer {
            // Around the slow run's folder: a table's directory keeps nothing it did not write,
            // so the quick run is refused before it writes, and the slow one commits.
            assert_fails(&run(&quick, &[]), 73, &["inner was not written by this project"]);
            let ended = child.wait_with_output().unwrap();
            assert!(ended.status.success(), "{}", text(&ended));
            assert!(!outer.join("_SUCCESS").exists());
            assert_every_reader_reads_the_manifest(&[slow_out]);
            continue;
        }
        run_ok(&quick, &[]);
        let ended = child.wait_with_output().unwrap();
        assert_fails(&ended, 73, &["is never written beside another output"]);
        assert!(!slow_out.join("_SUCCESS").exists(), "{}", slow_out.display());
        assert_every_reader_reads_the_manifest(&[quick_out]);
    }
}

/// A directory where this project writes a file (`_SUCCESS`, `_manifest.parquet`) holds what a
/// user put there: not even overwrite replaces it, and what it holds stays.
#[test]
fn a_folder_in_a_markers_place_is_never_replaced() {
    let dir = scratch("guard-marker-folder");
    let graph = dir.join("graph");
    generate(&graph, 300, 4, 8, 1);
    let out = dir.join("flat");
    let job = Job::flatten(&graph, &out).key("overwrite", true).write(&dir, "flat");
    for marker in ["_SUCCESS", "_manifest.parquet"] {
        run_ok(&job, &[]);
        std::fs::remove_file(out.join(marker)).unwrap();
        std::fs::create_dir(out.join(marker)).unwrap();
        std::fs::write(out.join(marker).join("precious"), b"mine").unwrap();
        assert_fails(&run(&job, &[]), 73, &[&format!("{marker} is a directory"), "not even overwrite"]);
        assert_eq!(std::fs::read(out.join(marker).join("precious")).unwrap(), b"mine");
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// An output that is a symlink leading to no directory (into a committed output's missing
/// folder, or a loop) is refused as an output that cannot be written (73), not as a retryable
/// failure, and nothing is written anywhere it might lead.
#[test]
fn a_symlink_leading_nowhere_is_not_an_output() {
    let dir = scratch("guard-dangling");
    let graph = dir.join("graph");
    generate(&graph, 300, 4, 8, 1);
    let flat = flatten(&dir, &graph, "flat", &[], |j| j.key("fanouts", vec![3, 3]));
    let before = snapshot(&flat);
    let (into, a, b) = (dir.join("into"), dir.join("loop-a"), dir.join("loop-b"));
    std::os::unix::fs::symlink(flat.join("sub"), &into).unwrap();
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    for link in [&into, &a] {
        let out = run(&Job::flatten(&graph, link).key("overwrite", true).write(&dir, "link"), &[]);
        assert_fails(&out, 73, &["a symlink that leads to no directory"]);
    }
    assert!(snapshot(&flat) == before && !flat.join("sub").exists());
    // A folder on the output's path that leads nowhere: 73, not a retry (75).
    let nowhere = dir.join("nowhere");
    std::os::unix::fs::symlink(dir.join("missing"), &nowhere).unwrap();
    for out in [nowhere.join("flat"), a.join("flat")] {
        let ended = run(&Job::flatten(&graph, &out).write(&dir, "beneath"), &[]);
        assert_fails(&ended, 73, &["on its path is a symlink that leads to no directory"]);
    }
    // In a job, before any stage runs: the first stage's output is not written.
    let first = dir.join("first");
    let partition = Job::table_named("partition")
        .key("nodes", location(graph.join("nodes")))
        .key("edges", location(graph.join("edges")))
        .key("output", location(&first));
    for out in [a.clone(), nowhere.join("flat")] {
        let ended = run(&partition.clone().and(Job::flatten(&graph, &out)).write(&dir, "job"), &[]);
        assert_fails(&ended, 73, &["[flatten] output", "leads to no directory"]);
        assert!(!first.exists(), "the partition ran before the job was refused");
    }
}
