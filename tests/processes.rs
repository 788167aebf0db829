//! Every stage on several processes over loopback, started by `scripts/launch-local.sh` as a
//! user would: the outputs equal one process's, and a process that dies ends the others.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// `[cluster]` for `n` processes of one worker on free loopback ports (the process count comes
/// from the command line).
fn cluster(n: usize) -> Job {
    Job::cluster().key("workers", 1).key("hosts", loopback_hosts(n))
}

/// Flatten, train (for `epochs`) and infer of `data` into `out/{flat,model,scores}`.
fn stages(data: &Path, out: &Path, epochs: i64) -> Job {
    let (flat, model) = (out.join("flat"), out.join("model"));
    let flatten = Job::flatten(data, &flat).key("hops", 2).key("fanouts", vec![4, 3]).key("seed", 5);
    let train = Job::train(&flat, &model).key("model", "sage").key("epochs", epochs).key("batch_size", 64);
    flatten.key("hub_threshold", 30).and(train.key("seed", 3)).and(Job::infer(data, &model, out.join("scores")))
}

fn launch(n: usize, job: &Path) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/launch-local.sh");
    Command::new("bash")
        .arg(script)
        .args([&n.to_string(), job.to_str().unwrap()])
        .env("GRAPHFLAT", env!("CARGO_BIN_EXE_graphflat"))
        .output()
        .unwrap()
}

#[test]
fn two_and_three_processes_give_one_process_outputs_for_every_stage() {
    let dir = scratch("processes");
    let data = dir.join("graph");
    generate(&data, 1200, 6, 8, 4);
    for n in [2, 3] {
        // The reference: one process of n workers (the trainer's plan depends on the workers).
        let threads = dir.join(format!("threads-{n}"));
        run_ok(&stages(&data, &threads, 3).write(&dir, &format!("threads-{n}")), &["--workers", &n.to_string()]);
        let procs = dir.join(format!("processes-{n}"));
        let out = launch(n, &cluster(n).and(stages(&data, &procs, 3)).write(&dir, &format!("processes-{n}")));
        assert!(out.status.success(), "{}", text(&out));

        assert!(
            read_records(&threads.join("flat")) == read_records(&procs.join("flat")),
            "{n} processes: records differ"
        );
        for file in ["model.bpk", "metrics.jsonl"] {
            let (a, b) = (
                std::fs::read(committed(&threads.join("model"), file)).unwrap(),
                std::fs::read(committed(&procs.join("model"), file)).unwrap(),
            );
            assert!(a == b, "{n} processes: {file} differs");
        }
        let (a, b) = (read_batches(&threads.join("scores")), read_batches(&procs.join("scores")));
        assert_eq!(sorted_rows(&a), sorted_rows(&b), "{n} processes: scores differ");
        // The run's facts hold every process's peak memory; the report shows the cluster.
        for stage in ["flat", "scores"] {
            let peaks = manifest(&procs.join(stage))["facts"]["peak_rss"].clone();
            let peaks = peaks.as_array().unwrap();
            assert!(peaks.len() == n && peaks.iter().all(|p| p.as_u64() > Some(0)), "{stage}: {peaks:?}");
        }
        let page = std::fs::read_to_string(procs.join("model/report.html")).unwrap();
        assert!(page.contains(&format!("{n} processes x 1 worker each")), "{n} processes: the report");
    }
    // And one process of one worker: the same records and scores of its own model.
    let one = dir.join("one");
    run_ok(&stages(&data, &one, 3).write(&dir, "one"), &["--workers", "1"]);
    assert!(read_records(&one.join("flat")) == read_records(&dir.join("processes-3").join("flat")));
}

/// Child processes, killed if a failing test leaves them running.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_killed_process_ends_the_other_two_with_no_output() {
    let dir = scratch("processes-kill");
    let data = dir.join("graph");
    generate(&data, 1200, 6, 8, 4);
    let out = dir.join("run");
    let job = cluster(3).and(stages(&data, &out, 100000)).write(&dir, "three");
    let spawn = |p: usize| {
        graphflat()
            .args(["run", job.to_str().unwrap(), "--processes", "3", "--process", &p.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut children = Children(vec![spawn(0), spawn(1), spawn(2)]);
    // Into training: the records are committed, the model is not.
    let started = Instant::now();
    while !out.join("flat").join("_SUCCESS").exists() {
        assert!(started.elapsed() < Duration::from_secs(60), "the flatten stage did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    children.0[1].kill().unwrap();
    let killed = Instant::now();
    for survivor in [2, 0] {
        let result = children.0.remove(survivor).wait_with_output().unwrap();
        assert!(killed.elapsed() < Duration::from_secs(20), "took {:?}", killed.elapsed());
        assert_fails(&result, 75, &["lost a peer process"]);
    }
    assert!(!has_weights(&out.join("model")));
    assert!(!out.join("scores").join("_SUCCESS").exists());
}

/// Processes that read different jobs (another `epochs`, or another option on one command
/// line) both end before any stage with the usage error naming them, and write nothing; the
/// same file with only `--process` differing runs.
#[test]
fn processes_that_read_different_jobs_refuse_to_start() {
    let dir = scratch("processes-jobs");
    let data = dir.join("graph");
    generate(&data, 300, 4, 6, 4);
    let out = dir.join("run");
    let hosts = cluster(2);
    let (a, b) = (
        hosts.clone().and(stages(&data, &out, 2)).write(&dir, "a"),
        hosts.and(stages(&data, &out, 3)).write(&dir, "b"),
    );
    let pair = |jobs: [&Path; 2], extra: [&[&str]; 2]| {
        let spawn = |p: usize| {
            graphflat()
                .args(["run", jobs[p].to_str().unwrap(), "--processes", "2", "--process", &p.to_string()])
                .args(extra[p])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let mut children = Children(vec![spawn(0), spawn(1)]);
        let started = Instant::now();
        let results: Vec<_> = children.0.drain(..).map(|c| c.wait_with_output().unwrap()).collect();
        assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
        results
    };
    for (jobs, extra) in [([&a, &b], [&[][..], &[][..]]), ([&a, &a], [&[][..], &["--workers", "2"][..]])] {
        for result in pair([jobs[0].as_path(), jobs[1].as_path()], extra) {
            // A usage error: retrying will not help until the job files agree.
            assert_fails(&result, 64, &["processes 0 and 1 read different jobs"]);
        }
        assert!(!out.join("flat").exists(), "nothing is written");
    }
    for result in pair([a.as_path(), a.as_path()], [&[], &[]]) {
        assert!(result.status.success(), "{}", text(&result));
    }
}

/// An error that every process agrees on (a label out of range, found by whichever worker
/// reads it) ends each process with that error, run after run, never with a peer's closed
/// connection: a failed process lets its connections end cleanly before it exits, so its
/// last messages reach the peers still finishing the agreement (`cluster::execute`).
#[test]
fn an_error_every_process_agrees_on_ends_each_with_that_error() {
    let dir = scratch("processes-agreed");
    let data = dir.join("graph");
    generate(&data, 600, 4, 6, 4);
    for n in [2, 3] {
        let flat = dir.join(format!("flat-{n}"));
        let flatten = Job::flatten(&data, &flat).key("hops", 2).key("fanouts", vec![4, 3]);
        let job = cluster(n).and(flatten).write(&dir, &format!("flatten-{n}"));
        for result in spawn_all(n, &job) {
            assert!(result.status.success(), "{}", text(&result));
        }
        let train = Job::train(&flat, dir.join("model")).key("classes", 2).key("epochs", 1);
        let job = cluster(n).and(train).write(&dir, &format!("train-{n}"));
        for _ in 0..4 {
            for result in spawn_all(n, &job) {
                assert_fails(&result, 65, &["column \"label\"", "not below classes = 2"]);
            }
        }
        assert!(!has_weights(&dir.join("model")));
    }
}

/// A training on two processes whose commit fails (another run committed the model first,
/// 73) ends both processes with 73, not only the one whose worker 0 commits: the record
/// trainer's commit and full-graph training's are agreed like every other failure.
#[test]
fn a_commit_that_fails_on_process_0_fails_every_process() {
    let dir = scratch("processes-commit");
    let data = dir.join("graph");
    generate(&data, 2000, 4, 6, 4);
    let flat = dir.join("flat");
    let flatten = Job::flatten(&data, &flat).key("hops", 2).key("fanouts", vec![4, 3]);
    run_ok(&flatten.write(&dir, "flatten"), &[]);
    let model = dir.join("model");
    let records = Job::train(&flat, &model).key("classes", 8).key("epochs", 40);
    let full = Job::table_named("train")
        .key("nodes", location(data.join("nodes")))
        .key("edges", location(data.join("edges")))
        .key("output", location(&model))
        .key("classes", 8)
        .key("epochs", 400);
    for (name, slow) in [("records", records), ("full", full)] {
        let _ = std::fs::remove_dir_all(&model);
        let job = cluster(2).and(slow).write(&dir, &format!("slow-{name}"));
        let mut children = spawn_processes(2, &job);
        // Once the slow run holds its marker (`tables::lease`), a quick run commits the same model.
        let started = Instant::now();
        let marked = || {
            std::fs::read_dir(model.join("_temporary"))
                .is_ok_and(|runs| runs.flatten().any(|run| run.path().join("run.json").exists()))
        };
        while !marked() {
            assert!(started.elapsed() < Duration::from_secs(60), "{name}: the slow run never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let quick = Job::train(&flat, &model).key("classes", 8).key("epochs", 1).write(&dir, "quick");
        run_ok(&quick, &[]);
        for result in children.0.drain(..).map(|c| c.wait_with_output().unwrap()) {
            assert_fails(&result, 73, &["another run committed this output first"]);
        }
    }
}

/// Runs `job` as `n` processes at once and returns what each printed, in process order.
fn spawn_all(n: usize, job: &Path) -> Vec<std::process::Output> {
    spawn_processes(n, job).0.drain(..).map(|c| c.wait_with_output().unwrap()).collect()
}

/// Starts `job` as `n` processes, their output piped; dropping the result kills them.
fn spawn_processes(n: usize, job: &Path) -> Children {
    let spawn = |p: usize| {
        graphflat()
            .args(["run", job.to_str().unwrap(), "--processes", &n.to_string(), "--process", &p.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    Children((0..n).map(spawn).collect())
}

/// `scripts/launch-local.sh` with a stand-in binary (a shell script): its exit code and what it
/// prints, on success, on one process's failure, and on TERM.
#[test]
fn the_launch_script_reports_the_first_failure_and_stops_on_term() {
    let dir = scratch("launch-script");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/launch-local.sh");
    let fake = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        Command::new("chmod").arg("755").arg(&path).status().unwrap();
        path
    };
    let launch_with = |binary: &Path| {
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .args(["3", "job.toml"])
            .env("GRAPHFLAT", binary)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let clean = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("unbound variable") && !err.contains("no such job"), "{err}");
        err
    };

    let ok = launch_with(&fake("ok", "exit 0")).output().unwrap();
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(clean(&ok), "");

    // Process 1 fails with 65; the others would run for a minute.
    let failing = fake("failing", "[ \"$6\" = 1 ] && exit 65\nexec sleep 60");
    let started = Instant::now();
    let failed = launch_with(&failing).output().unwrap();
    assert_eq!(failed.status.code(), Some(65), "{}", clean(&failed));
    assert!(clean(&failed).contains("exited with 65"));
    assert!(started.elapsed() < Duration::from_secs(30), "the others were not stopped");

    let child = launch_with(&fake("slow", "exec sleep 60")).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(143), "{}", clean(&stopped));
    clean(&stopped);
}

/// An overwrite on two processes, one of which gets SIGTERM once both have staged parts: the
/// job ends without a commit, and every reader of the output reads the earlier commit's rows,
/// exactly (the stopped run's parts never had data names); the next run removes them.
#[test]
fn a_terminated_process_of_two_leaves_the_committed_rows_to_every_reader() {
    let dir = scratch("processes-term");
    let data = dir.join("graph");
    generate(&data, 40_000, 8, 16, 2);
    let out = dir.join("flat");
    let flatten = Job::flatten(&data, &out).key("fanouts", vec![10, 10]).key("batch_size", 256).key("part_size_mb", 1);
    let job = cluster(2).and(flatten.key("overwrite", true)).write(&dir, "two");
    let launched = |job: &Path| {
        let out = launch(2, job);
        assert!(out.status.success(), "{}", text(&out));
    };
    launched(&job);
    let committed = manifest(&out)["run"].clone();
    let spawn = |p: usize| {
        graphflat()
            .args(["run", job.to_str().unwrap(), "--processes", "2", "--process", &p.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut children = Children(vec![spawn(0), spawn(1)]);
    let staged = || {
        let dirs = std::fs::read_dir(out.join("_temporary")).into_iter().flatten().flatten();
        dirs.flat_map(|run| std::fs::read_dir(run.path()).into_iter().flatten().flatten())
            .filter(|f| f.file_name().to_string_lossy().contains("-00001-"))
            .count()
    };
    let started = Instant::now();
    while staged() == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "process 1 staged no part");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = children.0[1].id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    for child in children.0.drain(..) {
        assert!(!child.wait_with_output().unwrap().status.success());
    }
    assert_eq!(manifest(&out)["run"], committed, "the stopped run committed");
    assert_eq!(parquet_files(&out).len(), manifest(&out)["parts"].as_array().unwrap().len());
    assert_every_reader_reads_the_manifest(&[&out]);
    launched(&job);
    assert!(!out.join("_temporary").exists(), "the stopped run's staged parts remain");
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// Two network stacks joined by a wire, as two machines or two pods: network namespaces `a`
/// and `b`, a veth pair between them (10.77.`net`.1 and .2) with a delay each way (`tc netem`;
/// a 200 Mbit/s limit, `tbf`, on a kernel without netem),
/// and in each namespace an /etc/hosts (`ip netns exec` mounts /etc/netns/<name>/hosts) that
/// names them `graphflat-0.graphflat` and `graphflat-1.graphflat`, as a headless Service names
/// an indexed Job's pods. Removed when dropped. `None` (said on stderr) where this user may not
/// make namespaces (not root, no `ip`).
struct Wire {
    spaces: [String; 2],
    net: u32,
}

impl Wire {
    fn new(net: u32) -> Option<Wire> {
        let tag = std::process::id() % 100_000;
        let spaces = [format!("gf{tag}-{net}a"), format!("gf{tag}-{net}b")];
        let ok = |args: &[&str]| Command::new("ip").args(args).status().is_ok_and(|s| s.success());
        if !ok(&["netns", "add", &spaces[0]]) {
            eprintln!("SKIPPED: cannot make network namespaces here (needs root and iproute2)");
            return None;
        }
        let wire = Wire { spaces, net };
        let [a, b] = &wire.spaces;
        let ends = [format!("gfv{tag}{net}a"), format!("gfv{tag}{net}b")];
        assert!(ok(&["netns", "add", b]));
        assert!(ok(&["link", "add", &ends[0], "netns", a, "type", "veth", "peer", "name", &ends[1], "netns", b]));
        for (i, (space, end)) in wire.spaces.iter().zip(&ends).enumerate() {
            assert!(ok(&["-n", space, "addr", "add", &format!("10.77.{net}.{}/24", i + 1), "dev", end]));
            assert!(ok(&["-n", space, "link", "set", end, "up"]));
            assert!(ok(&["-n", space, "link", "set", "lo", "up"]));
            // A delay where the kernel has netem; else a bandwidth limit (tbf), said on stderr.
            let qdisc = |rule: &[&str]| {
                let args = [&["-n", space.as_str(), "qdisc", "add", "dev", end.as_str(), "root"][..], rule].concat();
                Command::new("tc").args(args).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
            };
            if !qdisc(&["netem", "delay", "2ms"]) {
                eprintln!("no netem in this kernel: the wire is limited to 200 Mbit/s instead of delayed");
                assert!(qdisc(&["tbf", "rate", "200mbit", "burst", "64kb", "latency", "50ms"]));
            }
            let etc = Path::new("/etc/netns").join(space);
            std::fs::create_dir_all(&etc).unwrap();
            let hosts = format!(
                "127.0.0.1 localhost\n10.77.{net}.1 graphflat-0.graphflat\n10.77.{net}.2 graphflat-1.graphflat\n"
            );
            std::fs::write(etc.join("hosts"), hosts).unwrap();
        }
        Some(wire)
    }

    /// `graphflat run job` in namespace `index`, with `JOB_COMPLETION_INDEX = index` and no
    /// `--process`, as a pod of an indexed Job starts.
    fn spawn(&self, index: usize, job: &Path) -> std::process::Child {
        Command::new("ip")
            .args(["netns", "exec", &self.spaces[index], env!("CARGO_BIN_EXE_graphflat"), "run", job.to_str().unwrap()])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Cuts the wire (no reset reaches either side: the link just goes quiet).
    fn cut(&self) {
        let end = format!("gfv{}{}a", std::process::id() % 100_000, self.net);
        assert!(
            Command::new("ip").args(["-n", &self.spaces[0], "link", "set", &end, "down"]).status().unwrap().success()
        );
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        for space in &self.spaces {
            let _ = Command::new("ip").args(["netns", "del", space]).status();
            let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(space));
        }
    }
}

/// `[cluster]` of two processes of one worker named by a template, as in deploy/kubernetes/.
fn scheduled() -> Job {
    Job::cluster()
        .key("workers", 1)
        .key("processes", 2)
        .key("hosts", "graphflat-{i}.graphflat:2101")
        .key("peer_timeout_s", 4)
}

#[test]
fn two_processes_on_two_network_stacks_named_by_a_template_give_one_process_outputs() {
    let Some(wire) = Wire::new(1) else { return };
    let dir = scratch("processes-wire");
    let data = dir.join("graph");
    generate(&data, 1200, 6, 8, 4);
    let threads = dir.join("threads");
    run_ok(&stages(&data, &threads, 3).write(&dir, "threads"), &["--workers", "2"]);
    let procs = dir.join("wire");
    let job = scheduled().and(stages(&data, &procs, 3)).write(&dir, "wire");
    let mut children = Children(vec![wire.spawn(0, &job), wire.spawn(1, &job)]);
    for child in std::mem::take(&mut children.0) {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(read_records(&threads.join("flat")) == read_records(&procs.join("flat")), "records differ");
    let model = |dir: &Path| std::fs::read(committed(&dir.join("model"), "model.bpk")).unwrap();
    assert!(model(&threads) == model(&procs), "the models differ");
    let (a, b) = (read_batches(&threads.join("scores")), read_batches(&procs.join("scores")));
    assert_eq!(sorted_rows(&a), sorted_rows(&b), "scores differ");
}

#[test]
fn a_cut_wire_ends_both_processes_with_75_within_the_peer_timeout() {
    let Some(wire) = Wire::new(2) else { return };
    let dir = scratch("processes-cut");
    let data = dir.join("graph");
    generate(&data, 1200, 6, 8, 4);
    let out = dir.join("run");
    let job = scheduled().and(stages(&data, &out, 100000)).write(&dir, "cut");
    let mut children = Children(vec![wire.spawn(0, &job), wire.spawn(1, &job)]);
    let started = Instant::now();
    while !out.join("flat").join("_SUCCESS").exists() {
        assert!(started.elapsed() < Duration::from_secs(60), "the flatten stage did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    wire.cut();
    let cut = Instant::now();
    for process in [1, 0] {
        let result = children.0.remove(process).wait_with_output().unwrap();
        // peer_timeout_s (4) and a bound: a second of heartbeat and the stages' abort.
        assert!(cut.elapsed() < Duration::from_secs(4 + 10), "took {:?}", cut.elapsed());
        assert_fails(&result, 75, &["sent nothing for 4s", "peer_timeout_s"]);
    }
    assert!(!has_weights(&out.join("model")));
}
