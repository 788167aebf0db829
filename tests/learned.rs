//! Nodes without features and learned embeddings on the parameter server, end to end: a node
//! table without a `features` column flattens into records of no feature values; a link model
//! with `learned_embedding_dim` trains one row per node, sharded over the workers, and commits
//! the table in the model's `embeddings/` folder; GraphInfer reads each row at its node's
//! owner and its embeddings equal the trainer's forward pass (with the same rows) to 1e-4; the
//! same job on 2 workers and on 2 processes gives the same bits; every reader opens the table;
//! a node model's scores equal the trainer's too (row-wise Adagrad there).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow_array::RecordBatch;

/// A generated graph whose node table has lost its `features` column (plus `extra` nodes
/// without edges), its edges split with `split-edges --undirected`.
fn featureless_graph(dir: &Path, extra: &[i64]) -> PathBuf {
    let generated = dir.join("generated");
    generate(&generated, 300, 6, 4, 5);
    let data = dir.join("data");
    write_without_features(&generated.join("nodes"), &data.join("nodes"), extra);
    let (edges, out) = (generated.join("edges"), data.join("edges"));
    let split = ["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap(), "--seed", "3"];
    graphflat_ok(&[&split[..], &["--valid", "0.1", "--test", "0.1", "--undirected"]].concat());
    data
}

/// Writes the node table in `nodes` without its `features` column, plus `extra` nodes (every
/// other column null), as one file in `out`.
fn write_without_features(nodes: &Path, out: &Path, extra: &[i64]) {
    let mut batches: Vec<RecordBatch> = read_batches(nodes)
        .into_iter()
        .map(|b| {
            let keep: Vec<usize> = (0..b.num_columns()).filter(|&c| b.schema().field(c).name() != "features").collect();
            b.project(&keep).unwrap()
        })
        .collect();
    if !extra.is_empty() {
        let all = batches[0].schema();
        let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(extra.to_vec()));
        let columns = all.fields().iter().map(|f| match f.name().as_str() {
            "node_id" => ids.clone(),
            _ => arrow_array::new_null_array(f.data_type(), extra.len()),
        });
        batches.push(RecordBatch::try_new(all.clone(), columns.collect()).unwrap());
    }
    std::fs::create_dir_all(out).unwrap();
    let file = std::fs::File::create(out.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    batches.iter().for_each(|b| writer.write(b).unwrap());
    writer.close().unwrap();
}

/// The link flatten and a small learned-embedding training of `data` into `dir/<name>-*`.
fn learned_job(data: &Path, at: impl Fn(&str) -> PathBuf) -> Job {
    let flatten = Job::flatten(data, at("flat")).key("task", "link").key("fanouts", vec![5, 5]).key("overwrite", true);
    let train = Job::train(at("flat"), at("model"))
        .key("model", "sage")
        .key("hidden", 16)
        .key("embedding_dim", 8)
        .key("learned_embedding_dim", 12)
        .key("epochs", 6)
        .key("patience", 0)
        .key("batch_size", 32)
        .key("lr", 0.02)
        .key("seed", 7);
    flatten.and(train)
}

/// `dir/<name>-<what>` for each `what`.
fn prefixed(dir: &Path, name: &str) -> impl Fn(&str) -> PathBuf {
    let (dir, name) = (dir.to_path_buf(), name.to_owned());
    move |what| dir.join(format!("{name}-{what}"))
}

/// The model's learned table, by id, as bits (to compare runs exactly).
fn table_bits(model: &Path) -> BTreeMap<i64, Vec<u32>> {
    let table = graphtrainer::learned_table(&local_io(), model.to_str().unwrap()).unwrap();
    table.into_iter().map(|(id, row)| (id, row.iter().map(|v| v.to_bits()).collect())).collect()
}

#[test]
fn learned_embeddings_train_on_the_server_and_graphinfer_equals_the_trainer() {
    let dir = scratch("learned");
    let data = featureless_graph(&dir, &[]);
    let one = prefixed(&dir, "one");
    let out = run_ok(&learned_job(&data, &one).write(&dir, "one"), &["--workers", "2"]);
    assert!(out.contains("learned:") && out.contains("rows of 12"), "{out}");
    // The table: a row per node the trainer met, in the model's embeddings/ folder.
    let table = table_bits(&one("model"));
    let nodes = batches_in([data.join("nodes/part-0.parquet")]).iter().map(|b| b.num_rows()).sum::<usize>();
    assert!(table.len() > nodes / 2 && table.len() <= nodes, "{} rows for {nodes} nodes", table.len());
    // The same job on 2 processes of one worker: the same weights and table, bit for bit.
    let procs = prefixed(&dir, "procs");
    run_two_processes(&Job::loopback(2).and(learned_job(&data, &procs)).write(&dir, "procs"), &dir);
    assert!(table_bits(&procs("model")) == table, "the learned table differs on 2 processes");
    let weights = |model: &Path| std::fs::read(model_file(model, ".bpk")).unwrap();
    assert!(weights(&procs("model")) == weights(&one("model")), "the weights differ on 2 processes");
    // Learning: the rows moved from their seeded start, and the test AUC is above chance.
    let metrics = std::fs::read_to_string(one("model").join("metrics.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
    let first: serde_json::Value = serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
    eprintln!("learned: loss {} -> {}, test auc {}", first["loss"], last["loss"], last["test_auc"]);
    assert!(last["loss"].as_f64() < first["loss"].as_f64() && last["test_auc"].as_f64().unwrap() > 0.6, "{last}");
    // GraphInfer: each node's row at its owner; the embeddings equal the trainer's encoder.
    let emb = one("emb");
    let infer = run_ok(&Job::infer(&data, one("model"), &emb).write(&dir, "infer"), &["--workers", "3"]);
    let inferred = read_embeddings(&emb);
    let missing = nodes - table.len();
    assert!(infer.contains(&format!("{missing} nodes without a learned row (zeros)")), "{infer}");
    let forward =
        graphtrainer::forward_link_records(&local_io(), one("model").to_str().unwrap(), one("flat").to_str().unwrap())
            .unwrap();
    let mut worst = 0f32;
    for link in &forward {
        for (id, h) in &link.embeddings {
            let ours = &inferred[id];
            worst = h.iter().zip(ours).map(|(a, b)| (a - b).abs()).fold(worst, f32::max);
        }
    }
    assert!(worst < 1e-4, "an embedding differs from the trainer's by {worst}");
    // Every reader opens the table in the folder, and sees its rows once.
    let folder = one("model").join("embeddings");
    if let Some(python) = python() {
        let script = "import sys, pandas, pyarrow.parquet as pq, polars, duckdb\n\
            d = sys.argv[1]\n\
            print(len(pandas.read_parquet(d)), pq.read_table(d).num_rows, polars.read_parquet(d + '/*.parquet').height,\n\
                  duckdb.sql(f\"select count(distinct node_id) from '{d}/*.parquet'\").fetchall()[0][0])";
        let got = std::process::Command::new(python).args(["-c", script, folder.to_str().unwrap()]).output().unwrap();
        let counts = String::from_utf8_lossy(&got.stdout).trim().to_owned();
        assert_eq!(
            counts,
            [table.len(); 4].map(|n| n.to_string()).join(" "),
            "{}",
            String::from_utf8_lossy(&got.stderr)
        );
    }
}

#[test]
fn a_node_model_with_learned_rows_scores_in_graphinfer_as_in_the_trainer() {
    let dir = scratch("learned-node");
    let data = featureless_graph(&dir, &[]);
    let at = prefixed(&dir, "n");
    let flatten = Job::flatten(&data, at("flat")).key("fanouts", vec![4, 4]);
    let train = Job::train(at("flat"), at("model"))
        .key("model", "gcn")
        .key("learned_embedding_dim", 8)
        .key("learned_embedding_optimizer", "adagrad")
        .key("learned_embedding_lr", 0.1)
        .key("epochs", 5)
        .key("batch_size", 64);
    let job = flatten.and(train).and(Job::infer(&data, at("model"), at("scores")));
    let out = run_ok(&job.write(&dir, "node"), &["--workers", "2"]);
    assert!(out.contains("learned:") && out.contains("rows of 8"), "{out}");
    let inferred = scores_only(&read_scores(&at("scores")));
    let trained = record_scores(&at("model"), &at("flat"));
    // Every node is a target here: GraphInfer scores each as the trainer's forward pass does.
    assert!(max_difference(&inferred, &trained) < 1e-4, "GraphInfer differs from the trainer");
}

#[test]
fn a_node_without_a_row_gets_zeros_or_fails_the_job_and_no_features_needs_a_learned_table() {
    let dir = scratch("learned-missing");
    let data = featureless_graph(&dir, &[]);
    let at = prefixed(&dir, "m");
    // Records of no features and no learned embedding: nothing for the model to read.
    let flatten = Job::flatten(&data, at("flat")).key("task", "link").key("fanouts", vec![5, 5]);
    run_ok(&flatten.write(&dir, "flatten"), &[]);
    let out = run(&Job::train(at("flat"), at("bare")).key("epochs", 1).write(&dir, "bare"), &[]);
    assert_fails(&out, 64, &["carry no node features", "learned_embedding_dim"]);
    // Rows that blow up name their learning rate.
    let wild = Job::train(at("flat"), at("bare")).key("learned_embedding_dim", 4).key("learned_embedding_lr", 1e30);
    let out = run(&wild.key("epochs", 2).write(&dir, "wild"), &[]);
    assert_fails(&out, 65, &["not finite", "learned_embedding_lr"]);
    assert!(!has_weights(&at("bare")));
    run_ok(&learned_job(&data, &at).write(&dir, "train"), &[]);
    // A file of no run in the table's folder would be read with it: refused, overwrite or not.
    std::fs::copy(data.join("nodes/part-0.parquet"), at("model").join("embeddings/foreign.parquet")).unwrap();
    let out = run(&learned_job(&data, &at).write(&dir, "foreign"), &[]);
    assert_fails(&out, 73, &["embeddings/foreign.parquet", "not a part this project wrote"]);
    std::fs::remove_file(at("model").join("embeddings/foreign.parquet")).unwrap();
    // Two nodes new since training (in no record, so no row): zeros, counted.
    let later = featureless_graph(&dir.join("later"), &[1_000_000, 1_000_001]);
    let zero = Job::infer(&later, at("model"), at("zero"));
    let out = run_ok(&zero.write(&dir, "zero"), &["--workers", "2"]);
    assert!(out.contains("2 nodes without a learned row (zeros)"), "{out}");
    let inferred = read_embeddings(&at("zero"));
    assert_eq!(inferred.len(), 302);
    assert!(inferred[&1_000_000].iter().all(|v| v.is_finite()));
    // Or the job fails, naming one, and commits nothing.
    let strict = Job::infer(&later, at("model"), at("strict")).key("missing_embedding", "error");
    let out = run(&strict.write(&dir, "strict"), &["--workers", "2"]);
    assert_fails(&out, 65, &["has no row in the learned embedding table", "(2 nodes have none", "missing_embedding"]);
    assert!(!at("strict").join("_SUCCESS").exists());
}

/// A typed user-item graph whose users have no features (`generate --featureless user`): the
/// users get learned rows, the items and shops read their features; the table holds the users'
/// rows under their type's name, the same bits on 1 and 2 workers; GraphInfer scores every user
/// as the trainer's forward pass does (to 1e-4); a featureless type without learned rows is a
/// usage error naming it.
#[test]
fn featureless_users_of_a_typed_graph_train_learned_rows_and_graphinfer_equals_the_trainer() {
    let dir = scratch("learned-typed");
    let data = dir.join("typed");
    let generate = ["generate", "--hetero", "--featureless", "user", "--out", data.to_str().unwrap()];
    graphflat_ok(&[&generate[..], &["--nodes", "600", "--seed", "1"]].concat());
    let flat = typed::flatten_typed(&dir, &data, "flat", "", &[]);
    let job = |name: &str, keys: &str| {
        let model = dir.join(name);
        let text = format!(
            "[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 3\nbatch_size = 32\nseed = 5\n{keys}",
            flat.display().to_string(),
            model.display().to_string()
        );
        (write_job(&dir, name, &text), model)
    };
    let train = |name: &str, keys: &str, workers: &str| {
        let (job, model) = job(name, keys);
        (run(&job, &["--workers", workers]), model)
    };
    // Without learned rows, or with them for the items only, the users have nothing to read.
    let (out, _) = train("bare", "", "1");
    assert_fails(&out, 64, &["node type user has no features", "learned_embedding_dim"]);
    let (out, _) = train("items", "learned_embedding_dim = 4\nlearned_embedding_types = [\"item\"]\n", "1");
    assert_fails(&out, 64, &["node type user has no features", "learned_embedding_types"]);
    let (out, _) = train("nobody", "learned_embedding_dim = 4\nlearned_embedding_types = [\"buyer\"]\n", "1");
    assert_fails(&out, 64, &["\"buyer\"", "no node type", "item, shop, user"]);

    let keys = "learned_embedding_dim = 6\nlearned_embedding_types = [\"user\"]\nlearned_embedding_lr = 0.05\n";
    let (out, model) = train("model", keys, "2");
    assert!(out.status.success(), "{}", text(&out));
    let table = table_bits(&model);
    let users: usize = read_batches(&data.join("nodes/user")).iter().map(RecordBatch::num_rows).sum();
    assert!(table.len() > users / 2 && table.len() <= users, "{} rows for {users} users", table.len());
    // Types are numbered by name: item 0, shop 1, user 2.
    assert!(table.keys().all(|&k| schemas::typed::unpack(k).0 == 2), "a row of another type than user");
    // The same job on 2 processes of one worker: the same batches, the same table, bit for bit.
    let (procs, model_of_procs) = job("procs", keys);
    let cluster = Job::loopback(2).write(&dir, "cluster");
    let joined = std::fs::read_to_string(&cluster).unwrap() + &std::fs::read_to_string(&procs).unwrap();
    run_two_processes(&write_job(&dir, "procs", &joined), &dir);
    assert!(table_bits(&model_of_procs) == table, "the learned table differs on 2 workers and 2 processes");

    let missing = users - table.len();
    let infer = graphinfer_scores_as_the_trainer(&dir, (&data, &flat), &model, missing);
    new_users_are_named_where_the_run_computes_with_them(&dir, &data, &model, missing);
    tampered_tables_are_bad_input(&dir, &model, &infer);
    pandas_reads_the_table(&model, table.len());
}

/// GraphInfer reads each user's row at its owner and scores as the trainer's forward pass,
/// counting the `missing` users without a row; returns its job.
fn graphinfer_scores_as_the_trainer(dir: &Path, (data, flat): (&Path, &Path), model: &Path, missing: usize) -> String {
    let scores = dir.join("scores");
    let infer = format!(
        "{}[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\n",
        typed::graph_tables(data),
        model.display().to_string(),
        scores.display().to_string()
    );
    let summary = run_ok(&write_job(dir, "infer", &infer), &["--workers", "3"]);
    assert!(summary.contains(&format!("{missing} nodes without a learned row (zeros)")), "{summary}");
    let inferred: BTreeMap<i64, Vec<f32>> = typed::read_typed_scores(&scores)
        .into_iter()
        .filter_map(|((t, id), (_, _, scores))| (t == "user").then(|| (id, scores.unwrap())))
        .collect();
    let trained = record_scores(model, flat);
    assert!(max_difference(&inferred, &trained) < 1e-4, "GraphInfer differs from the trainer");
    infer
}

/// Two users new since training (no edges, so no row): named by type and id, and counted
/// only where the run computes with them (not when it outputs the items alone).
fn new_users_are_named_where_the_run_computes_with_them(dir: &Path, data: &Path, model: &Path, missing: usize) {
    let users2 = dir.join("users2");
    std::fs::create_dir_all(&users2).unwrap();
    let mut batches = read_batches(&data.join("nodes/user"));
    let new_ids = arrow_array::Int64Array::from(vec![100_000, 100_001]);
    let schema = batches[0].schema();
    let columns = schema.fields().iter().map(|f| match f.name().as_str() {
        "node_id" => Arc::new(new_ids.clone()) as arrow_array::ArrayRef,
        _ => arrow_array::new_null_array(f.data_type(), 2),
    });
    batches.push(RecordBatch::try_new(schema.clone(), columns.collect()).unwrap());
    let file = std::fs::File::create(users2.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    batches.iter().for_each(|b| writer.write(b).unwrap());
    writer.close().unwrap();
    let graph =
        typed::graph_tables(data).replace(&data.join("nodes/user").display().to_string(), users2.to_str().unwrap());
    let strict = |name: &str, keys: &str| {
        let out = dir.join(name);
        let text = format!(
            "{graph}[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\nmissing_embedding = \"error\"\n{keys}",
            model.display().to_string(),
            out.display().to_string()
        );
        (run(&write_job(dir, name, &text), &["--workers", "2"]), out)
    };
    let (out, at) = strict("strict", "");
    let words = ["node user 100000 of the [graph]'s node tables", &format!("({} nodes have none", missing + 2)];
    assert_fails(&out, 65, &words);
    assert!(!at.join("_SUCCESS").exists());
    let (out, _) = strict("items-only", "node_types = [\"item\"]\n");
    assert!(out.status.success() && text(&out).contains("0 nodes without a learned row"), "{}", text(&out));
}

/// A table edited after its commit, its manifest made to match (as a hand-made table would
/// be): a row given twice, or a row of a type the model gives no rows, is bad input.
fn tampered_tables_are_bad_input(dir: &Path, model: &Path, infer: &str) {
    if let Some(python) = python() {
        for (name, edit, words) in [
            ("twice", "t = pa.concat_tables([t, t.slice(0, 1)])", ["part-", "row", "has a second row", "node user"]),
            (
                "item-row",
                "t = t.set_column(0, 'node_type', pa.array(['item'] + t['node_type'].to_pylist()[1:]))",
                ["part-", "row 0", "node_type", "node type item, whose nodes the model gives no learned rows"],
            ),
        ] {
            let edited = dir.join(name);
            let script = format!("{TAMPER}\n{edit}\nrecommit(t)");
            let args = ["-c", &script, model.to_str().unwrap(), edited.to_str().unwrap()];
            let got = std::process::Command::new(python).args(args).output().unwrap();
            assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
            let job =
                infer.replace(model.to_str().unwrap(), edited.to_str().unwrap()).replace("scores\"", "tampered\"");
            assert_fails(&run(&write_job(dir, name, &job), &["--workers", "2"]), 65, &words);
        }
    }
}

/// The table as pandas reads it: the type's name beside each id.
fn pandas_reads_the_table(model: &Path, rows: usize) {
    if let Some(python) = python() {
        let script = "import sys, pandas\nt = pandas.read_parquet(sys.argv[1])\n\
            print(list(t.columns), sorted(set(t.node_type)), len(t), len(t.embedding[0]))";
        let folder = model.join("embeddings");
        let got = std::process::Command::new(python).args(["-c", script, folder.to_str().unwrap()]).output().unwrap();
        let expected = format!("['node_type', 'node_id', 'embedding'] ['user'] {} 6", rows);
        assert_eq!(String::from_utf8_lossy(&got.stdout).trim(), expected, "{}", String::from_utf8_lossy(&got.stderr));
    }
}

/// Python: copies the model in argv[1] to argv[2] and loads its first learned part as `t`;
/// `recommit(t)` writes it back and makes the manifest's entry (size, CRC-32, blocks, rows)
/// match it.
const TAMPER: &str = r#"import sys, os, shutil, json, zlib, base64, struct, pyarrow as pa, pyarrow.parquet as pq
src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True); shutil.copytree(src, dst)
part = 'embeddings/' + sorted(os.listdir(dst + '/embeddings'))[0]
t = pq.read_table(f'{dst}/{part}')
def recommit(t):
    pq.write_table(t, f'{dst}/{part}')
    data = open(f'{dst}/{part}', 'rb').read()
    f = pq.ParquetFile(f'{dst}/_manifest.parquet')
    m = json.loads(f.metadata.metadata[b'graphflat.manifest'])
    b = m['block_bytes']
    for p in (p for p in m['parts'] if p['name'] == part):
        p.update(rows=t.num_rows, bytes=len(data), crc32=zlib.crc32(data))
        p['blocks'] = base64.b64encode(b''.join(struct.pack('<I', zlib.crc32(data[i:i + b])) for i in range(0, len(data), b))).decode()
    m['rows'], m['bytes'] = sum(p['rows'] for p in m['parts']), sum(p['bytes'] for p in m['parts'])
    meta = dict(f.metadata.metadata); meta[b'graphflat.manifest'] = json.dumps(m).encode()
    pq.write_table(pa.Table.from_pylist([], schema=f.schema_arrow).replace_schema_metadata(meta), f'{dst}/_manifest.parquet')"#;

/// Each process's data segment (`ulimit -d`, RLIMIT_DATA: what `malloc` and the allocator's
/// own mappings may take) in the capped test: below the table's 984 MB of values and Adam's
/// moments, so no process may hold the whole table. Measured: one process needs more than
/// 1,150 MB (it fails there), each of two needs 760 to 800 MB: about 60 MB of its own, its half
/// of the table (an eighth more while its arrays grow), a batch's rows and their copies in the
/// pull's messages.
const CAP_MB: u64 = 900;

/// `graphflat run job` (`--process p` when given) under a data limit of [`CAP_MB`].
fn capped(job: &Path, process: Option<usize>) -> std::process::Child {
    let mut args = vec!["-c".to_owned(), format!("ulimit -d {} && exec \"$0\" \"$@\"", CAP_MB << 10)];
    args.extend([env!("CARGO_BIN_EXE_graphflat"), "run", job.to_str().unwrap()].map(str::to_owned));
    args.extend(process.map(|p| ["--process".to_owned(), p.to_string()]).into_iter().flatten());
    std::process::Command::new("bash")
        .args(args)
        // As a user runs it: with RUST_BACKTRACE, std's report of a panic at the memory limit
        // symbolizes a backtrace, whose allocation fails inside the report and deadlocks it.
        .env_remove("RUST_BACKTRACE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_table_larger_than_a_process_may_hold_trains_across_two_processes() {
    let dir = scratch("learned-capped");
    let generated = dir.join("generated");
    generate(&generated, 80_000, 4, 2, 3);
    write_without_features(&generated.join("nodes"), &dir.join("data/nodes"), &[]);
    let flat = dir.join("flat");
    let flatten = Job::flatten(dir.join("data"), &flat).key("edges", location(generated.join("edges")));
    run_ok(&flatten.key("hops", 1).key("fanouts", vec![2]).write(&dir, "f"), &[]);
    // 1024 values a row with Adam's two moments: 12 KB a row, 984 MB for 80k nodes.
    let table_mb = 80_000.0 * (12.0 * 1024.0 + 16.0) / 1e6;
    assert!((CAP_MB as f64) < table_mb, "the cap holds the whole table");
    let train = |out: &str| {
        Job::train(&flat, dir.join(out))
            .key("model", "sage")
            .key("hidden", 16)
            .key("learned_embedding_dim", 1024)
            .key("epochs", 1)
            .key("patience", 0)
            .key("batch_size", 64)
            .key("cache_mb", 8)
    };
    let alone = capped(&Job::cluster().key("workers", 1).and(train("alone")).write(&dir, "alone"), None);
    let alone = alone.wait_with_output().unwrap();
    assert!(!alone.status.success(), "one process held the whole table under the cap:\n{}", text(&alone));
    assert!(text(&alone).contains("memory allocation"), "{}", text(&alone));
    let job = Job::loopback(2).and(train("two")).write(&dir, "two");
    let children: Vec<_> = (0..2).map(|p| capped(&job, Some(p))).collect();
    let outs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for out in &outs {
        assert!(out.status.success(), "a process failed under the cap:\n{}", text(out));
    }
    // Every node's row, half on each process.
    let rows: usize = batches_in(parquet_files(&dir.join("two/embeddings"))).iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 80_000);
    let share = table_mb / 2.0;
    let line = text(&outs[0]).lines().find(|l| l.contains("learned:")).unwrap_or_default().to_owned();
    let largest: f64 = line.split("at most ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
    assert!(largest < share * 1.1, "{line}: a process holds more than its half ({share:.1} MB)");
}

/// A run stopped after 2 epochs and resumed from its checkpoints reaches the uninterrupted
/// run's weights, learned table and metrics, bit for bit, on 2 workers: each worker's rows come
/// back with their moments, step count and kept best copy. Each checkpoint replaces the
/// previous one's rows; a job of another learned width cannot resume from them.
#[test]
fn a_resumed_run_with_learned_rows_reaches_the_uninterrupted_one() {
    let dir = scratch("learned-resume");
    let data = featureless_graph(&dir, &[]);
    let flat = dir.join("flat");
    let flatten = Job::flatten(&data, &flat).key("task", "link").key("fanouts", vec![5, 5]);
    run_ok(&flatten.write(&dir, "flatten"), &["--workers", "2"]);
    let job = |model: &Path, epochs: i64| {
        Job::train(&flat, model)
            .key("model", "sage")
            .key("hidden", 16)
            .key("embedding_dim", 8)
            .key("learned_embedding_dim", 12)
            .key("epochs", epochs)
            .key("patience", 5)
            .key("batch_size", 32)
            .key("seed", 7)
            .key("checkpoint_every", 2)
    };
    run_ok(&job(&dir.join("whole"), 6).write(&dir, "whole"), &["--workers", "2"]);
    let model = dir.join("resumed");
    run_ok(&job(&model, 2).write(&dir, "first"), &["--workers", "2"]);
    run_ok(&job(&model, 6).key("resume", true).write(&dir, "resume"), &["--workers", "2"]);
    assert!(table_bits(&dir.join("whole")) == table_bits(&model), "the learned table differs after resuming");
    for file in ["model.bpk", "metrics.jsonl"] {
        let whole = std::fs::read(committed(&dir.join("whole"), file)).unwrap();
        assert!(whole == std::fs::read(committed(&model, file)).unwrap(), "{file} differs after resuming");
    }
    // Each worker's last checkpoint keeps its rows; the earlier ones' are gone, and so are the
    // first run's (the resumed run's commit removes the checkpoints of runs that have ended).
    let rows: Vec<String> = std::fs::read_dir(model.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("-rows-"))
        .collect();
    assert!(rows.len() == 2 && rows.iter().all(|n| n.ends_with("-rows-6.bin")), "{rows:?}");
    let wider = job(&model, 8).key("learned_embedding_dim", 16).key("resume", true);
    let out = run(&wider.write(&dir, "wider"), &["--workers", "2"]);
    assert_fails(&out, 66, &["checkpoints"]);
}
