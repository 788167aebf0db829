//! Jobs against a real S3-compatible server on 127.0.0.1: moto's `moto_server`, which `.ci/run`
//! installs into a venv and names in `GRAPHFLAT_MOTO_SERVER`. Skipped, with a message, when no
//! moto_server is found.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::*;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreExt};

const SECRET: &str = "s3cr3t-never-printed";

/// A moto server on a free port, stopped when dropped.
struct Moto {
    child: Child,
    port: u16,
    /// Whether it serves HTTPS, with a certificate of its own making.
    tls: bool,
    server: PathBuf,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto() -> Option<Moto> {
    moto_serving(false)
}

fn moto_serving(tls: bool) -> Option<Moto> {
    let server = std::env::var_os("GRAPHFLAT_MOTO_SERVER").map(PathBuf::from).filter(|p| p.exists()).or_else(|| {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/moto_server");
        venv.exists().then_some(venv)
    });
    let Some(server) = server else {
        eprintln!("SKIPPED: no moto_server (set GRAPHFLAT_MOTO_SERVER, or run .ci/run, which installs one)");
        return None;
    };
    let port = free_port();
    let child = Command::new(&server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(tls.then_some("--ssl"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "moto_server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Moto { child, port, tls, server })
}

impl Moto {
    fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", if self.tls { "https" } else { "http" }, self.port)
    }

    /// Creates a bucket (moto takes an unsigned PUT; over TLS, Python's client sends it).
    fn bucket(&self, name: &str) {
        use std::io::{Read, Write};
        if self.tls {
            let put = format!(
                "import ssl, urllib.request as r; r.urlopen(r.Request('{}/{name}', method='PUT'), \
                 context=ssl._create_unverified_context())",
                self.endpoint()
            );
            // The venv's Python beside moto_server, else the system's.
            let venv = self.server.with_file_name("python");
            let python = if venv.exists() { venv } else { PathBuf::from("python3") };
            let out = Command::new(python).args(["-c", &put]).output().unwrap();
            assert!(out.status.success(), "{}", text(&out));
            return;
        }
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(stream, "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }

    /// `graphflat args...` with this server's AWS environment.
    fn graphflat(&self, args: &[&str], cwd: &Path) -> std::process::Output {
        self.command(args, cwd).output().unwrap()
    }

    /// The command `graphflat args...` with this server's AWS environment.
    fn command(&self, args: &[&str], cwd: &Path) -> Command {
        let mut command = graphflat();
        command
            .args(args)
            .current_dir(cwd)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT", self.endpoint())
            .env("AWS_ALLOW_HTTP", "true");
        command
    }

    /// How many multipart uploads of `bucket` are in progress (moto answers an unsigned
    /// ListMultipartUploads).
    fn uploads(&self, bucket: &str) -> usize {
        use std::io::{Read, Write};
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(stream, "GET /{bucket}?uploads HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        reply.matches("<UploadId>").count()
    }

    /// A client of `bucket` on this server.
    fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        tables::backends::install_tls_provider();
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id("testing")
            .with_secret_access_key(SECRET)
            .with_region("us-east-1")
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::AllowInvalidCertificates), self.tls.to_string())
            .build()
            .unwrap()
    }

    /// Every key under `prefix` (as written, not URL-decoded), with its size.
    fn keys(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let prefix = object_store::path::Path::parse(prefix).unwrap();
        let mut keys: Vec<(String, u64)> = runtime
            .block_on(store.list(Some(&prefix)).try_collect::<Vec<_>>())
            .unwrap()
            .into_iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect();
        keys.sort();
        keys
    }

    fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let path = object_store::path::Path::parse(key).unwrap();
        runtime.block_on(async { store.get(&path).await.unwrap().bytes().await.unwrap().to_vec() })
    }

    fn delete(&self, bucket: &str, key: &str) {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let path = object_store::path::Path::parse(key).unwrap();
        runtime.block_on(store.delete(&path)).unwrap();
    }

    fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let path = object_store::path::Path::parse(key).unwrap();
        runtime.block_on(store.put(&path, bytes.to_vec().into())).unwrap();
    }

    /// Copies every object under `s3://bucket/prefix` into `to`.
    fn download(&self, bucket: &str, prefix: &str, to: &Path) {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let prefix = object_store::path::Path::from(prefix);
            let objects: Vec<_> = store.list(Some(&prefix)).try_collect().await.unwrap();
            std::fs::create_dir_all(to).unwrap();
            for object in objects {
                let bytes = store.get(&object.location).await.unwrap().bytes().await.unwrap();
                std::fs::write(to.join(object.location.filename().unwrap()), bytes).unwrap();
            }
        });
    }
}

/// `s3://graphs/g/{nodes,edges}`: the graph `generate(dir, 3000, 6, 8, 2)` writes on disk.
fn generate_on_s3(s3: &Moto, dir: &Path) {
    let args = generate_args("s3://graphs/g", 3000, 6, 8, 2);
    let out = s3.graphflat(&args.iter().map(String::as_str).collect::<Vec<_>>(), dir);
    assert!(out.status.success(), "{}", text(&out));
}

/// Flatten, train and infer of the tables in `data` on two workers.
fn stages(data: impl AsRef<Path>, flat: impl AsRef<Path>, model: impl AsRef<Path>, scores: impl AsRef<Path>) -> Job {
    Job::cluster()
        .key("workers", 2)
        .and(Job::flatten(&data, &flat).key("fanouts", vec![5, 3]))
        .and(Job::train(&flat, &model).key("epochs", 2))
        .and(Job::infer(&data, &model, &scores))
}

#[test]
fn the_pipeline_on_s3_equals_the_pipeline_on_disk() {
    let Some(s3) = moto() else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-pipeline");
    let local = dir.join("local");
    generate(&local, 3000, 6, 8, 2);
    // The same tables on S3: generated with the same settings straight into the bucket.
    generate_on_s3(&s3, &dir);

    let on_disk = stages(&local, dir.join("flat"), dir.join("model-local"), dir.join("scores"));
    run_ok(&on_disk.write(&dir, "local"), &[]);
    let on_s3 =
        stages("s3://graphs/g", "s3://graphs/flat", "s3://graphs/model", "s3://graphs/scores").write(&dir, "s3");
    let out = s3.graphflat(&["run", on_s3.to_str().unwrap()], &dir);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(!log.contains(SECRET), "the secret key appears in the output");

    s3.download("graphs", "flat", &dir.join("flat-s3"));
    assert!(read_records(&dir.join("flat")) == read_records(&dir.join("flat-s3")), "records differ");
    s3.download("graphs", "model", &dir.join("model-s3"));
    for file in ["model.bpk", "model.json", "metrics.jsonl"] {
        let read = |name: &str| std::fs::read(committed(&dir.join(name), file)).unwrap();
        assert!(read("model-local") == read("model-s3"), "{file} differs");
    }
    s3.download("graphs", "scores", &dir.join("scores-s3"));
    let (a, b) = (read_batches(&dir.join("scores")), read_batches(&dir.join("scores-s3")));
    assert_eq!(a.iter().map(|b| b.num_rows()).sum::<usize>(), 3000);
    assert_eq!(sorted_rows(&a), sorted_rows(&b), "scores differ");

    // Readers that take an s3:// URI read exactly the committed rows, with no option but the
    // standard AWS environment.
    let env = [
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET.to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ENDPOINT_URL", s3.endpoint()),
    ];
    let uris = [Path::new("s3://graphs/flat"), Path::new("s3://graphs/scores")];
    assert_every_reader_reads_the_manifest_with(&uris, &env);

    // A finished output on S3 is kept without `overwrite` (create-if-absent marker).
    let again = s3.graphflat(&["run", on_s3.to_str().unwrap()], &dir);
    assert_eq!(again.status.code(), Some(73), "{}", text(&again));
}

/// `[precompute]` from tables on S3 into S3 writes the rows it writes on disk, and its records
/// and GraphInfer's scores over them follow on S3 as they do on disk.
#[test]
fn the_first_layer_precomputed_on_s3_equals_it_on_disk() {
    let Some(s3) = moto() else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-precompute");
    let local = dir.join("local");
    generate(&local, 3000, 6, 8, 2);
    generate_on_s3(&s3, &dir);
    let precompute = |data: &str, out: &str| {
        Job::table_named("precompute")
            .key("nodes", format!("{data}/nodes"))
            .key("edges", format!("{data}/edges"))
            .key("output", out)
    };
    let on_disk = Job::cluster().key("workers", 2).and(precompute(&location(&local), &location(dir.join("ax"))));
    run_ok(&on_disk.write(&dir, "local"), &[]);
    // Then records of one hop over it, a GCN with a dense first layer, and its scores.
    let over = |table: &'static str| {
        Job::table_named(table).key("nodes", "s3://graphs/ax").key("edges", "s3://graphs/g/edges")
    };
    let on_s3 = Job::cluster()
        .key("workers", 2)
        .and(precompute("s3://graphs/g", "s3://graphs/ax"))
        .and(over("flatten").key("output", "s3://graphs/flat").key("hops", 1).key("fanouts", vec![5]))
        .and(Job::train("s3://graphs/flat", "s3://graphs/model").key("epochs", 1))
        .and(over("infer").key("model", "s3://graphs/model").key("output", "s3://graphs/scores"));
    let out = s3.graphflat(&["run", on_s3.write(&dir, "s3").to_str().unwrap()], &dir);
    assert!(out.status.success(), "{}", text(&out));
    s3.download("graphs", "ax", &dir.join("ax-s3"));
    assert_eq!(sorted_rows(&read_batches(&dir.join("ax"))), sorted_rows(&read_batches(&dir.join("ax-s3"))));
    s3.download("graphs", "scores", &dir.join("scores-s3"));
    assert_eq!(read_batches(&dir.join("scores-s3")).iter().map(|b| b.num_rows()).sum::<usize>(), 3000);
}

/// HTTPS through the process's TLS provider (ring's, `tables::backends`): moto serves a
/// certificate of its own making. Trusted on request (`AWS_ALLOW_INVALID_CERTIFICATES`), a
/// graph is generated into the bucket and flattened there; not trusted, the flatten fails with
/// a clear error in bounded time, not a panic, and commits nothing.
#[test]
fn https_endpoints_sign_and_verify_through_the_tls_provider() {
    let Some(s3) = moto_serving(true) else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-https");
    let args = generate_args("s3://graphs/g", 300, 4, 4, 1);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let trusted =
        |args: &[&str]| s3.command(args, &dir).env("AWS_ALLOW_INVALID_CERTIFICATES", "true").output().unwrap();
    let out = trusted(&args);
    assert!(out.status.success(), "{}", text(&out));
    let flatten = Job::flatten("s3://graphs/g", "s3://graphs/flat").key("fanouts", vec![3, 3]);
    let out = trusted(&["run", flatten.write(&dir, "trusted").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = trusted(&["inspect", "s3://graphs/flat"]);
    assert!(out.status.success() && text(&out).contains("300"), "{}", text(&out));

    let storage = Job::storage().key("retries", 1).key("retry_timeout_s", 5).key("timeout_s", 2);
    let untrusted = storage.and(Job::flatten("s3://graphs/g", "s3://graphs/flat-untrusted")).write(&dir, "untrusted");
    let started = Instant::now();
    let out = s3.graphflat(&["run", untrusted.to_str().unwrap()], &dir);
    let message = text(&out);
    assert!(!out.status.success() && out.status.code() != Some(101), "{message}");
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}\n{message}", started.elapsed());
    let committed = s3.keys("graphs", "flat-untrusted").into_iter().filter(|(key, _)| key.ends_with("_SUCCESS"));
    assert_eq!(committed.count(), 0, "nothing committed");
}

#[test]
fn missing_buckets_and_bad_uris_are_clear_errors() {
    let Some(s3) = moto() else { return };
    let dir = scratch("s3-errors");
    let missing = Job::flatten("s3://no-such-bucket", dir.join("flat")).write(&dir, "missing");
    let out = s3.graphflat(&["run", missing.to_str().unwrap()], &dir);
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert_eq!(out.status.code(), Some(66), "a missing bucket is a missing input: {message}");
    assert!(message.contains("no-such-bucket"), "{message}");
    assert!(!message.contains(SECRET), "{message}");

    // A missing bucket for the output is an output that cannot be written, not a missing input.
    let data = dir.join("graph");
    generate(&data, 200, 4, 4, 1);
    let to_missing = Job::flatten(&data, "s3://no-such-bucket/flat").key("fanouts", vec![3, 3]);
    let out = s3.graphflat(&["run", to_missing.write(&dir, "to-missing").to_str().unwrap()], &dir);
    let message = text(&out);
    assert_eq!(out.status.code(), Some(73), "a missing output bucket is an output that cannot be written: {message}");
    assert!(message.contains("no-such-bucket"), "{message}");

    let body = "[flatten]\nnodes = \"s3://\"\nedges = \"e\"\noutput = \"o\"\n";
    let out = s3.graphflat(&["run", write_job(&dir, "bad", body).to_str().unwrap()], &dir);
    assert!(!out.status.success() && text(&out).contains("s3://"), "{}", text(&out));
}

/// An S3 endpoint that accepts connections and never answers.
fn silent_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

#[test]
fn a_server_that_stops_answering_fails_with_the_retry_exit_in_bounded_time() {
    let dir = scratch("s3-silent");
    let port = silent_server();
    // [storage] alone points the job at the server: it overrides the environment's endpoint.
    let storage = Job::storage().key("endpoint", format!("http://127.0.0.1:{port}")).key("allow_http", true);
    let storage = storage.key("region", "us-east-1").key("retries", 2).key("retry_timeout_s", 10);
    let storage = storage.key("connect_timeout_s", 1).key("timeout_s", 1);
    let job = storage.and(Job::flatten("s3://graphs", dir.join("flat"))).write(&dir, "silent");
    let started = Instant::now();
    let out = graphflat()
        .args(["run", job.to_str().unwrap()])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let (elapsed, message) = (started.elapsed(), text(&out));
    assert_eq!(out.status.code(), Some(75), "{message}");
    // Three attempts of one second each, and their backoff: far below a minute.
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}\n{message}");
    assert!(message.contains("s3://graphs/"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    assert!(!dir.join("flat").join("_SUCCESS").exists());
}

#[test]
fn missing_credentials_are_a_clear_error() {
    let Some(s3) = moto() else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-no-credentials");
    let storage = Job::storage().key("endpoint", s3.endpoint()).key("allow_http", true).key("region", "us-east-1");
    let storage = storage.key("retries", 1).key("retry_timeout_s", 5).key("timeout_s", 2).key("connect_timeout_s", 1);
    let job = storage.and(Job::flatten("s3://graphs", "s3://graphs/flat")).write(&dir, "anonymous");
    let started = Instant::now();
    let mut command = graphflat();
    command.args(["run", job.to_str().unwrap()]).current_dir(&dir);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        command.env_remove(key);
    }
    // No instance metadata service here: the credential lookup must fail, not hang.
    let out = command.env("AWS_EC2_METADATA_DISABLED", "true").output().unwrap();
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}\n{message}", started.elapsed());
    assert!(message.contains("s3://graphs/"), "{message}");
}

#[test]
fn on_s3_a_run_keeps_out_of_foreign_objects_and_exact_keys_and_racing_runs_leave_one_output() {
    let Some(s3) = moto() else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-data-loss");
    generate_on_s3(&s3, &dir);
    // An output key with characters URL parsing treats specially, holding someone else's
    // object: refused with overwrite or without (a table's readers would read it), and kept.
    let key = "odd?x#y%41 z";
    s3.put("graphs", &format!("{key}/theirs/part-0.parquet"), b"not ours");
    let flatten = Job::flatten("s3://graphs/g", format!("s3://graphs/{key}")).key("fanouts", vec![4, 3]);
    for (overwrite, words) in [(false, "holds files this project did not write"), (true, "theirs was not written")] {
        let job = flatten.clone().key("overwrite", overwrite).write(&dir, "refused");
        let refused = s3.graphflat(&["run", job.to_str().unwrap()], &dir);
        assert_eq!(refused.status.code(), Some(73), "{}", text(&refused));
        assert!(text(&refused).contains(words), "{}", text(&refused));
    }
    let keys = s3.keys("graphs", key);
    assert_eq!(keys.len(), 1, "the foreign object was touched: {keys:?}");
    s3.delete("graphs", &format!("{key}/theirs/part-0.parquet"));

    let path = flatten.key("overwrite", true).write(&dir, "overwrite");
    let children: Vec<_> = (0..2)
        .map(|_| {
            graphflat()
                .args(["run", path.to_str().unwrap()])
                .current_dir(&dir)
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", SECRET)
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ENDPOINT", s3.endpoint())
                .env("AWS_ALLOW_HTTP", "true")
                .output()
                .unwrap()
        })
        .collect();
    for out in &children {
        assert!(out.status.success(), "{}", text(out));
    }
    let keys = s3.keys("graphs", key);
    // The manifest lists parts that are all there, whole, at the exact key.
    let manifest = manifest_of(s3.get("graphs", &format!("{key}/_manifest.parquet")));
    for part in manifest["parts"].as_array().unwrap() {
        let name = part["name"].as_str().unwrap();
        let size = keys.iter().find(|(k, _)| k == &format!("{key}/{name}")).map(|(_, s)| *s);
        assert_eq!(size, part["bytes"].as_u64(), "{name}");
    }
    assert_eq!(manifest["rows"], 3000);
    assert!(s3.keys("graphs", "odd").iter().all(|(k, _)| k.starts_with(key)), "written under another key");
    // Nothing but the listed parts under data names, and no run's staged objects left.
    let parts = keys.iter().filter(|(k, _)| k.ends_with(".parquet") && !k.contains("/_"));
    assert_eq!(parts.count(), manifest["parts"].as_array().unwrap().len(), "{keys:?}");
    assert!(keys.iter().all(|(k, _)| !k.contains("_temporary")), "{keys:?}");
}

/// A store that fails while a stage reads its model or its records is a failure to retry (75),
/// not a missing input (66).
#[test]
fn a_store_failure_reading_a_model_or_records_is_the_retry_exit() {
    let dir = scratch("s3-unreachable-inputs");
    let storage = Job::storage()
        .key("endpoint", format!("http://127.0.0.1:{}", free_port()))
        .key("allow_http", true)
        .key("region", "us-east-1")
        .key("retries", 1)
        .key("retry_timeout_s", 5.0)
        .key("connect_timeout_s", 1.0)
        .key("timeout_s", 1.0);
    for (name, stage, uri) in [
        ("model", Job::infer(&dir, "s3://models/gcn", dir.join("scores")), "s3://models/gcn"),
        ("records", Job::train("s3://graphs/flat", dir.join("model")), "s3://graphs/flat"),
        // A path that holds the cause's words: the cause is still named at the end.
        (
            "cause",
            Job::train("s3://graphs/Connection refused (os error 111)/flat", dir.join("model")),
            "s3://graphs/Connection refused (os error 111)/flat",
        ),
    ] {
        let job = storage.clone().and(stage).write(&dir, name);
        let out = graphflat()
            .args(["run", job.to_str().unwrap()])
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .output()
            .unwrap();
        assert_fails(&out, 75, &[uri]);
        assert_no_repeats(&out);
        let line = text(&out).lines().find(|l| l.starts_with("error: ")).map(str::to_owned).unwrap_or_default();
        assert!(line.ends_with(": Connection refused (os error 111)"), "the cause, last: {line}");
        assert!(!text(&out).contains(SECRET));
    }
}

/// Both ways of staging on S3 commit the same output. A run killed while it uploads leaves
/// multipart uploads in progress, which its `.upload` records name: the next commit aborts
/// them, whichever staging it uses.
#[test]
fn both_stagings_commit_the_same_output_and_a_killed_runs_uploads_are_aborted() {
    let Some(s3) = moto() else { return };
    s3.bucket("graphs");
    let dir = scratch("s3-staging");
    let args = generate_args("s3://graphs/big", 40_000, 8, 16, 2);
    let out = s3.graphflat(&args.iter().map(String::as_str).collect::<Vec<_>>(), &dir);
    assert!(out.status.success(), "{}", text(&out));
    let flatten = |out: &str, staging: &str| {
        let job = Job::cluster().key("workers", 2).and(Job::storage().key("staging", staging));
        job.and(Job::flatten("s3://graphs/big", out).key("fanouts", vec![5, 5]).key("overwrite", true))
            .write(&dir, &format!("{}-{staging}", out.rsplit('/').next().unwrap()))
    };
    let killed = flatten("s3://graphs/killed", "multipart");
    let mut child =
        s3.command(&["run", killed.to_str().unwrap()], &dir).stderr(std::process::Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    while !s3.keys("graphs", "killed/_temporary").iter().any(|(k, _)| k.ends_with(".upload")) {
        assert!(started.elapsed() < Duration::from_secs(120), "no upload started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(s3.uploads("graphs") > 0, "the killed run left no upload in progress");

    let copied = s3.graphflat(&["run", flatten("s3://graphs/killed", "copy").to_str().unwrap()], &dir);
    assert!(copied.status.success(), "{}", text(&copied));
    assert_eq!(s3.uploads("graphs"), 0, "the killed run's uploads were not aborted");
    assert!(s3.keys("graphs", "killed").iter().all(|(k, _)| !k.contains("_temporary")));
    let uploaded = s3.graphflat(&["run", flatten("s3://graphs/uploaded", "multipart").to_str().unwrap()], &dir);
    assert!(uploaded.status.success(), "{}", text(&uploaded));
    s3.download("graphs", "killed", &dir.join("copied"));
    s3.download("graphs", "uploaded", &dir.join("uploaded"));
    let records = read_records(&dir.join("copied"));
    assert_eq!(records.len(), 40_000);
    assert!(records == read_records(&dir.join("uploaded")), "the two stagings committed different records");
}
