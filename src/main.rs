//! `graphflat`: runs AGL-style graph learning jobs over Parquet tables.

mod alloc;
mod exit;
mod inspect;
mod job_report;

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use exit::{Exit, WithCause};
use graphflat::split;
use job_report::Ledger;
use schemas::job::generate;
use schemas::{Cause, GenerateConfig, JobFile, StorageConfig};
use tables::commit::Stage;
use tables::{Io, Place};

/// Large blocks on huge pages (see `alloc`).
#[global_allocator]
static ALLOCATOR: alloc::HugePages = alloc::HugePages;

type Result<T> = std::result::Result<T, Exit>;

#[derive(Parser)]
#[command(
    name = "graphflat",
    version = VERSION,
    about = "Graph learning as batch jobs over Parquet: flatten k-hop neighborhoods, train GNNs, score every node",
    long_about = "Graph learning as batch jobs over Parquet files, in the style of Ant Group's AGL.\n\n\
        `graphflat run job.toml` runs the stages a job file names: [partition] gives every node a \
        part that keeps most edges inside one, [flatten] writes every target's k-hop record, \
        [train] trains a GNN on records, [infer] scores and embeds every node from the node \
        and edge tables and a trained model. `generate` and `import` bring \
        graphs in as node and edge tables; `split-edges` splits an edge table's edges into \
        train, valid and test for link prediction; `inspect` shows what a table or record set \
        holds.\n\n\
        Logs go to stderr; set RUST_LOG (for example RUST_LOG=debug) to change their level.\n\n\
        Exit codes: 0 done; 64 bad command line or job file; 65 bad input data; 66 a missing or \
        unfinished input; 70 internal error (a bug); 73 an output that cannot be written; 75 a \
        store or peer process failed and a retry may help; 143 stopped by SIGTERM."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the stages of a job file ([generate], [partition], [precompute], [flatten], [train], [infer])
    /// in order.
    ///
    /// On several machines, every process runs the same job file with its own --process.
    Run {
        /// The job file (TOML). See jobs/ for commented examples.
        job: PathBuf,
        /// This process's index in [cluster] (overrides the file's `process`). Without it, a
        /// process takes its index from JOB_COMPLETION_INDEX when set (each pod of a Kubernetes
        /// indexed Job has its own; see deploy/kubernetes/).
        #[arg(long)]
        process: Option<usize>,
        /// How many processes take part (overrides [cluster] processes; without [cluster]
        /// hosts they meet on 127.0.0.1:2101, :2102, ...). See scripts/launch-local.sh.
        #[arg(long)]
        processes: Option<usize>,
        /// Worker threads per process (overrides [cluster] workers).
        #[arg(long)]
        workers: Option<usize>,
        /// Continue training from the latest checkpoint in the [train] output (sets resume).
        #[arg(long)]
        resume: bool,
    },
    /// Write a synthetic graph: power-law in-degrees with hubs, planted communities as labels,
    /// label-correlated features and a train/valid/test split.
    Generate {
        /// Directory that receives nodes/ and edges/ (local path or URI).
        #[arg(long)]
        out: String,
        #[arg(long, default_value_t = generate::DEFAULT_NODES)]
        nodes: u64,
        /// Edges per node on average.
        #[arg(long, default_value_t = generate::DEFAULT_AVG_DEGREE)]
        avg_degree: u64,
        #[arg(long, default_value_t = generate::DEFAULT_FEATURE_DIM)]
        feature_dim: usize,
        #[arg(long, default_value_t = generate::DEFAULT_CLASSES)]
        classes: usize,
        /// Zipf exponent of in-degrees (larger: bigger hubs).
        #[arg(long, default_value_t = generate::DEFAULT_SKEW)]
        skew: f64,
        /// Share of a node's in-edges from its own class.
        #[arg(long, default_value_t = generate::DEFAULT_HOMOPHILY)]
        homophily: f64,
        /// Scale of the class centroids in the node features (noise has unit variance).
        #[arg(long, default_value_t = generate::DEFAULT_FEATURE_SIGNAL)]
        feature_signal: f64,
        /// Width of the edge features (0: the edge table has none). With --hetero, buys edges get
        /// this many and follows edges half (at least 1); returns and sells none.
        #[arg(long, default_value_t = generate::DEFAULT_EDGE_FEATURE_DIM)]
        edge_feature_dim: usize,
        /// Scale of the per-class centroids (of the destination's class) in the edge features.
        #[arg(long, default_value_t = generate::DEFAULT_EDGE_FEATURE_SIGNAL)]
        edge_feature_signal: f64,
        /// Multi-hot targets (list<float32> labels, one per class) instead of class ids.
        #[arg(long)]
        multi_label: bool,
        /// A typed graph: users (the labeled target type), items and shops, each of its own
        /// feature width, joined by buys, returns, follows and sells, into
        /// nodes/<type>/ and edges/<relation>/. A user's class shows only through the
        /// relation of its items: jobs/hetero.toml reads it.
        #[arg(long)]
        hetero: bool,
        /// With --hetero: also erased/nodes/ and erased/edges/, the same graph with types and
        /// relations erased (ids offset by type, features zero-padded, every edge both ways).
        #[arg(long, requires = "hetero")]
        erased: bool,
        /// With --hetero: a node type (user, item or shop) whose table is written without its
        /// features column; repeat for more. Its nodes need learned embeddings to train on
        /// ([train] learned_embedding_dim): jobs/user-item.toml.
        #[arg(long, requires = "hetero", value_name = "TYPE")]
        featureless: Vec<String>,
        #[arg(long, default_value_t = generate::DEFAULT_SEED)]
        seed: u64,
        /// Replace the tables of an earlier `generate` there. Another command's or stage's output
        /// is never replaced, nor written into (exit 73).
        #[arg(long)]
        overwrite: bool,
    },
    /// Import a dataset into node and edge tables.
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
    /// Split an edge table's edges into train, valid and test for link prediction: the same
    /// rows, with a `split` column.
    ///
    /// Every stage passes messages over `train` edges (and edges without a split) only; `valid`
    /// and `test` edges are held out of every record and of GraphInfer's graph. An edge's split
    /// is drawn from a hash of (seed, src, dst), or of (seed, min, max) with --undirected, so the
    /// two directions of an edge stored twice share one split. Prints the edges per split.
    SplitEdges {
        /// The edge table (local path or URI).
        #[arg(long)]
        edges: String,
        /// Directory that receives the split edge table (not inside the input, nor holding it).
        #[arg(long)]
        out: String,
        /// Share of edges held out for validation, in [0, 1).
        #[arg(long, default_value_t = split::DEFAULT_VALID)]
        valid: f64,
        /// Share of edges held out for testing, in [0, 1); --valid + --test must be below 1.
        #[arg(long, default_value_t = split::DEFAULT_TEST)]
        test: f64,
        #[arg(long, default_value_t = split::DEFAULT_SEED)]
        seed: u64,
        /// Give `src -> dst` and `dst -> src` the same split (an undirected graph stored with
        /// both directions, as OGB's and Cora's are).
        #[arg(long)]
        undirected: bool,
        /// Replace the table of an earlier `split-edges` there. Another command's or stage's output
        /// is never replaced, nor written into (exit 73).
        #[arg(long)]
        overwrite: bool,
    },
    /// Build the report of committed outputs as one HTML page: each output's run facts
    /// (phases, memory, distributions), and a model's loss and scores per epoch.
    ///
    /// `graphflat run` writes this page (with the job file and exit status) into the model
    /// directory of a job that trains and to its `[report] output`; this command builds one from
    /// the committed outputs of any jobs. A page never goes inside a table's directory.
    Report {
        /// Output directories (local paths or URIs) of [flatten], [train] or [infer].
        #[arg(required = true)]
        outputs: Vec<String>,
        /// The page to write. A file already there is replaced only if it is a graphflat report.
        #[arg(long, default_value = "report.html")]
        out: String,
    },
    /// Show what a table, record set or model holds: schema, metadata, size, label and split
    /// counts, record sizes and the first row; for a model directory, its model-<run>.json.
    Inspect {
        /// A Parquet file, a directory of part files (local path or URI), or a model directory.
        table: String,
    },
}

#[derive(Subcommand)]
enum ImportFormat {
    /// OGB's raw node-property layout (raw/*.csv.gz, split/<name>/*.csv.gz), e.g. ogbn-arxiv.
    Ogb {
        /// The dataset folder (holding raw/ and split/).
        dir: PathBuf,
        /// Directory that receives nodes/ and edges/.
        #[arg(long)]
        out: String,
        /// Which folder under split/ to use (default: the only one).
        #[arg(long)]
        split: Option<String>,
        /// Replace the tables of an earlier `import` there. Another command's or stage's output
        /// is never replaced, nor written into (exit 73).
        #[arg(long)]
        overwrite: bool,
    },
}

fn main() {
    alloc::keep_batches_in_the_heap();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    cluster::install_panic_hook();
    exit::exit_on_signals();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = e.print();
            std::process::exit(Cause::Usage.exit_code());
        }
    };
    let ended = std::panic::catch_unwind(|| run(cli));
    // A failure seen before any stop began is the job's own (bad input, say): it is said and
    // kept. Where a stop came first, its message and code are the process's end: the failure
    // may be its doing (a commit refused, the run's temporary files removed).
    let own_failure = matches!(&ended, Ok(Err(_))) && exit::failing_unless_stopped();
    if !own_failure && let Some(code) = exit::after_a_stop() {
        std::process::exit(code);
    }
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(exit)) => exit.exit(),
        Err(payload) => {
            let message = schemas::message::panic_text(payload.as_ref());
            Exit::new(Cause::Internal, anyhow::anyhow!("internal error (a bug; please report it): {message}")).exit()
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run { job, process, processes, workers, resume } => {
            let overrides = Overrides { process, processes, workers, resume };
            run_job(&job, &overrides)
        }
        Command::Generate {
            out,
            nodes,
            avg_degree,
            feature_dim,
            classes,
            skew,
            homophily,
            feature_signal,
            edge_feature_dim,
            edge_feature_signal,
            multi_label,
            hetero,
            erased,
            featureless,
            seed,
            overwrite,
        } => {
            let config = GenerateConfig {
                nodes,
                avg_degree,
                feature_dim,
                classes,
                skew,
                homophily,
                feature_signal,
                edge_feature_dim,
                edge_feature_signal,
                multi_label,
                hetero,
                erased,
                featureless,
                seed,
                overwrite,
                ..GenerateConfig::with_output(out)
            };
            // Commands without a job file use the environment's store settings.
            generate(&*Io::new(&StorageConfig::default()).cause(Cause::Internal)?, &config).map(|_| ())
        }
        Command::Import { format: ImportFormat::Ogb { dir, out, split, overwrite } } => {
            import_ogb(&dir, &out, split.as_deref(), overwrite)
        }
        Command::SplitEdges { edges, out, valid, test, seed, undirected, overwrite } => {
            split_edges(&split::SplitEdges { edges, out, valid, test, seed, undirected, overwrite })
        }
        Command::Inspect { table } => inspect::inspect(&table),
        Command::Report { outputs, out } => job_report::of_outputs(&outputs, &out),
    }
}

/// `graphflat import ogb`: the dataset in `dir` into `out`'s node and edge tables.
fn import_ogb(dir: &std::path::Path, out: &str, split: Option<&str>, overwrite: bool) -> Result<()> {
    // Commands without a job file use the environment's store settings.
    let io = Io::new(&StorageConfig::default()).cause(Cause::Internal)?;
    let imported = graphflat::import::import_ogb(&io, dir, out, split, overwrite)
        .map_err(|e| Exit::new(e.cause(), anyhow::Error::new(e).context(format!("importing {}", dir.display()))))?;
    println!(
        "imported {} nodes ({} features), {} edges ({} features), split {} into {out}",
        imported.nodes,
        imported.feature_dim,
        imported.edges,
        imported.edge_feature_dim,
        imported.split.as_deref().unwrap_or("(none)")
    );
    Ok(())
}

/// `graphflat split-edges`: an edge table's train/valid/test split.
fn split_edges(config: &split::SplitEdges) -> Result<()> {
    // Commands without a job file use the environment's store settings.
    let io = Io::new(&StorageConfig::default()).cause(Cause::Internal)?;
    let counts = split::split_edges(&io, config).map_err(|e| {
        let context = format!("splitting {}", schemas::redact(&config.edges));
        Exit::new(e.cause(), anyhow::Error::new(e).context(context))
    })?;
    println!(
        "split {} edges into {}: {} train, {} valid, {} test ({}, seed {})",
        counts.total(),
        config.out,
        counts.train,
        counts.valid,
        counts.test,
        if config.undirected { "undirected" } else { "directed" },
        config.seed
    );
    Ok(())
}

/// What the command line sets over the job file.
struct Overrides {
    process: Option<usize>,
    processes: Option<usize>,
    workers: Option<usize>,
    resume: bool,
}

/// The largest job file read (a job file is a few kB): `/dev/zero` or a huge file named by
/// mistake is a usage error, never read whole.
const MAX_JOB_FILE: u64 = 1 << 20;

/// Reads up to `limit` bytes of `path`; `None` when it holds more. A pipe (`run <(...)`) is
/// read as it comes, so a FIFO no one writes to waits, as `cat` would.
fn read_at_most(path: &PathBuf, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Reads the job file and applies the command line's overrides; returns it with its text.
fn read_job(path: &PathBuf, overrides: &Overrides) -> Result<(JobFile, String)> {
    let &Overrides { process, processes, workers, resume } = overrides;
    let bytes = read_at_most(path, MAX_JOB_FILE)
        .with_context(|| format!("reading job file {}", path.display()))
        .cause(Cause::NoInput)?
        .ok_or_else(|| Exit::usage(format!("job file {}: larger than {MAX_JOB_FILE} bytes", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| Exit::usage(format!("job file {}: not UTF-8 text ({e})", path.display())))?;
    let mut job = JobFile::parse(&text).map_err(|e| Exit::usage(format!("in job file {}: {e}", path.display())))?;
    if let Some(p) = process.map(Ok).or_else(scheduled_index).transpose()? {
        job.cluster.process = p;
    }
    if let Some(n) = processes {
        job.cluster.processes = n;
    }
    if let Some(w) = workers {
        job.cluster.workers = w;
    }
    if resume {
        match &mut job.train {
            Some(train) => train.resume = true,
            None => return Err(Exit::usage("--resume applies to a [train] stage, and this job has none")),
        }
    }
    job.cluster.check().map_err(Exit::usage)?;
    job.cluster.job = fingerprint(&job);
    if stages_of(&job).is_empty() {
        return Err(Exit::usage(format!(
            "{} names no stage: add [generate], [partition], [precompute], [flatten], [train] or [infer]",
            path.display()
        )));
    }
    Ok((job, text))
}

/// The variable a scheduler sets to each process's index: Kubernetes sets it in every pod of an
/// indexed Job.
const SCHEDULED_INDEX: &str = "JOB_COMPLETION_INDEX";

/// This process's index as its scheduler gave it ([`SCHEDULED_INDEX`]), when set.
fn scheduled_index() -> Option<Result<usize>> {
    let value = std::env::var_os(SCHEDULED_INDEX)?;
    let index = value.to_str().and_then(|v| v.trim().parse().ok());
    Some(index.ok_or_else(|| Exit::usage(format!("{SCHEDULED_INDEX} = {value:?} is no process index (0, 1, ...)"))))
}

/// Runs the job's stages, then writes its report (process 0; see `job_report`).
fn run_job(path: &PathBuf, overrides: &Overrides) -> Result<()> {
    let (job, text) = read_job(path, overrides)?;
    if job.train.as_ref().is_some_and(|t| t.full_graph()) {
        alloc::keep_arena_heaps();
    }
    // One I/O runtime for the job, carrying its `[storage]` to every stage.
    let io = Io::new(&job.storage).cause(Cause::Internal)?;
    let page = match &job.report {
        Some(report) => {
            let page = io.output(&report.output).map_err(|e| Exit::new(e.cause(), e))?;
            job_report::check_place(&page, &job, &io)?;
            Some(page)
        }
        None => None,
    };
    check_outputs_apart(&job, &io)?;
    let mut ledger = Ledger::default();
    let result = run_stages(&job, &io, &mut ledger);
    if job.cluster.process != 0 {
        return result;
    }
    for (stage, output) in stages_of(&job) {
        ledger.not_run_unless_seen(stage, output);
    }
    let info = report::Job {
        file: path.display().to_string(),
        // The page is a file people attach to tickets: user information in URIs is masked.
        text: schemas::redact(&text),
        cluster: cluster_shape(job.cluster.processes, job.cluster.threads()),
        failure: result.as_ref().err().map(|e| (e.cause.exit_code(), e.message())),
        version: VERSION.to_owned(),
    };
    // A stopped job writes no report (a stop during the last switch lets the job reach here:
    // src/exit.rs); one that comes while it is written waits for it, and says it was written.
    let written = match tables::stop::Switch::report() {
        Ok(_writing) => {
            let written = ledger.write(&io, info, page);
            exit::reported(&written);
            written
        }
        Err(_) => Vec::new(),
    };
    if !written.is_empty() {
        match &result {
            Ok(()) => println!("report:         {}", written.join(", ")),
            Err(_) => tracing::info!("report: {}", written.join(", ")),
        }
    }
    result
}

/// The job as every process must read it (every key but `cluster.process`, after the command
/// line's options) as a 64-bit FNV-1a hash: the processes compare it when they connect.
fn fingerprint(job: &JobFile) -> u64 {
    let mut same = job.clone();
    same.cluster.process = 0;
    let text = serde_json::to_vec(&same).unwrap_or_default();
    text.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// "2 processes x 4 workers each".
fn cluster_shape(processes: usize, workers: usize) -> String {
    let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!("{} x {} each", count(processes, "process", "processes"), count(workers, "worker", "workers"))
}

/// The binary's version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("GRAPHFLAT_COMMIT"), ")");

/// The stages a job names, in the order they run, with their outputs.
fn stages_of(job: &JobFile) -> Vec<(Stage, &str)> {
    let mut stages = Vec::new();
    if let Some(c) = &job.generate {
        stages.push((Stage::Generate, c.output.as_str()));
    }
    if let Some(c) = &job.partition {
        stages.push((Stage::Partition, c.output.as_str()));
    }
    if let Some(c) = &job.precompute {
        stages.push((Stage::Precompute, c.output.as_str()));
    }
    if let Some(c) = &job.flatten {
        stages.push((Stage::Flatten, c.output.as_str()));
    }
    if let Some(c) = &job.train {
        stages.push((Stage::Train, c.output.as_str()));
    }
    if let Some(c) = &job.infer {
        stages.push((Stage::Infer, c.output.as_str()));
    }
    stages
}

/// The directories the job's stages write, each named as the job names it: `[generate]`'s
/// tables (not its output, which holds them beside other stages' outputs), every other
/// stage's output.
fn written_dirs(job: &JobFile) -> Vec<(String, String)> {
    let mut dirs = Vec::new();
    if let Some(c) = &job.generate {
        let tables = match c.hetero {
            false => vec!["nodes".to_owned(), "edges".to_owned()],
            true => graphflat::hetero::table_dirs(c.erased),
        };
        let root = c.output.trim_end_matches('/');
        dirs.extend(tables.into_iter().map(|t| ("[generate] output".to_owned(), format!("{root}/{t}"))));
    }
    for (stage, output) in stages_of(job).into_iter().filter(|(s, _)| *s != Stage::Generate) {
        dirs.push((format!("[{}] output", stage.name()), output.to_owned()));
    }
    if let Some(pairs) = job.infer.as_ref().and_then(|c| c.pairs_output.as_deref()) {
        dirs.push(("[infer] pairs_output".to_owned(), pairs.to_owned()));
    }
    dirs
}

/// Refuses (64) a job two of whose stages write one directory, or one inside another's, and
/// (73) one with an output no write can reach (`tables::commit::check_path`), before anything
/// runs: the later stage would replace or pollute what the earlier committed, or fail after it.
fn check_outputs_apart(job: &JobFile, io: &Io) -> Result<()> {
    let dirs = written_dirs(job);
    let places: Vec<(&str, Place)> =
        dirs.iter().filter_map(|(key, uri)| io.output(uri).ok().map(|p| (key.as_str(), p))).collect();
    for (i, (key, place)) in places.iter().enumerate() {
        if let Some((other, theirs)) = places[..i].iter().find(|(_, p)| p.overlaps(place)) {
            return Err(Exit::usage(format!(
                "{other} {} and {key} {}: one is, holds or lies inside the other; each stage of a job \
                 writes a directory of its own",
                theirs.shown(),
                place.shown()
            )));
        }
    }
    for (key, place) in &places {
        tables::commit::check_path(place).map_err(|e| Exit::new(e.cause(), anyhow::anyhow!("{key} {e}")))?;
    }
    Ok(())
}

/// The places of `uris` that parse (a report goes there only if the stage may write there).
fn places(io: &Io, uris: &[&str]) -> Vec<Place> {
    uris.iter().filter_map(|uri| io.output(uri).ok()).collect()
}

/// Records a stage's end in `ledger`: its committed outputs, or its failure.
fn settle<T>(ledger: &mut Ledger, io: &Io, stage: Stage, uris: &[&str], result: Result<T>) -> Result<T> {
    let outputs = places(io, uris);
    match &result {
        Ok(_) => ledger.committed(io, stage, outputs),
        Err(e) => ledger.failed(io, stage, uris[0], outputs, e),
    }
    result
}

fn run_stages(job: &JobFile, io: &std::sync::Arc<Io>, ledger: &mut Ledger) -> Result<()> {
    // What a stop (a signal) says depends on the stage running and whether it is the last.
    let last = stages_of(job).last().map(|(stage, _)| *stage);
    let begin = |stage: Stage| exit::running(stage.name(), Some(stage) == last);
    if let Some(config) = &job.generate {
        begin(Stage::Generate);
        run_generate(job, io, ledger, config)?;
    }
    if let Some(config) = &job.partition {
        begin(Stage::Partition);
        run_partition(job, io, ledger, config)?;
    }
    if let Some(config) = &job.precompute {
        begin(Stage::Precompute);
        run_precompute(job, io, ledger, config)?;
    }
    if let Some(config) = &job.flatten {
        begin(Stage::Flatten);
        run_flatten(job, io, ledger, config)?;
    }
    if let Some(config) = &job.train {
        begin(Stage::Train);
        run_train(job, io, ledger, config)?;
    }
    if let Some(config) = &job.infer {
        begin(Stage::Infer);
        run_infer(job, io, ledger, config)?;
    }
    Ok(())
}

/// The job's `[generate]`: skipped where its output already holds every table of a graph;
/// else run on process 0 (only there: the other processes start after it).
fn run_generate(job: &JobFile, io: &Io, ledger: &mut Ledger, config: &GenerateConfig) -> Result<()> {
    let out = io.place(&config.output).map_err(|e| Exit::new(e.cause(), e))?;
    let tables: Vec<String> = match config.hetero {
        false => vec!["nodes".into(), "edges".into()],
        true => graphflat::hetero::table_dirs(config.erased),
    };
    // Every table committed, by one run (a generate writes its tables under one run and commits
    // them together; tables of two runs are a generate stopped between two tables' switches,
    // or an older graphflat's, and are generated again). So is a graph whose tables committed
    // so far all name the missing ones as written with them (`together`): the first generate
    // into the directory, stopped between its switches.
    let (runs, missing, partial) = io.block_on(async {
        let (mut runs, mut missing, mut partial) = (Vec::new(), false, true);
        for table in &tables {
            let dir = table.split('/').fold(out.clone(), |p, part| p.child(part));
            if !dir.child(schemas::SUCCESS_MARKER).exists().await {
                missing = true;
                continue;
            }
            // One that does not read is left for the stages that read it to name.
            let manifest = tables::commit::read_manifest(&dir).await.ok().flatten();
            partial &= manifest.as_ref().is_some_and(|m| !m.together.is_empty());
            runs.extend(manifest.map(|m| m.run));
        }
        runs.dedup();
        (runs, missing, partial)
    });
    let again = match (missing, runs.len()) {
        (true, 1) if partial => {
            Some("some of a graph's tables, committed by one generate that did not commit the others")
        }
        (false, 2..) => Some("tables of several runs"),
        _ => None,
    };
    if !missing && again.is_none() {
        tracing::info!("generate: {} already holds a graph; skipping", out.shown());
        let line = ("graph".into(), "already there; not generated again".into());
        ledger.done(Stage::Generate, &config.output, vec![line]);
    } else if job.cluster.process == 0 {
        let mut config = config.clone();
        if let Some(held) = again {
            tracing::warn!(
                "generate: {} holds {held} (a generate stopped between its tables' commits, or an older graphflat's); \
                 generating the whole graph again",
                out.shown()
            );
            config.overwrite = true;
        }
        let config = &config;
        match generate(io, config) {
            Ok(g) => ledger.done(Stage::Generate, &config.output, generated_lines(&g)),
            Err(e) => {
                ledger.failed(io, Stage::Generate, &config.output, Vec::new(), &e);
                return Err(e);
            }
        }
    } else {
        return Err(Exit::usage("[generate] runs on process 0 only; run it before starting the other processes"));
    }
    Ok(())
}

/// The job's `[partition]`, its summary printed by process 0.
fn run_partition(
    job: &JobFile,
    io: &std::sync::Arc<Io>,
    ledger: &mut Ledger,
    config: &schemas::job::PartitionConfig,
) -> Result<()> {
    let parts = config.parts_for(job.cluster.processes * job.cluster.threads());
    tracing::info!(
        "partition: {parts} parts (balance {}), {} workers x {} processes",
        config.balance,
        job.cluster.threads(),
        job.cluster.processes
    );
    let result = graphpartition::run(io, config, &job.cluster)
        .map_err(|f| Exit::stage(f, graphpartition::Error::cause, "partition failed; this run committed no output"));
    settle_and_print(job, ledger, io, Stage::Partition, &config.output, result)
}

/// The job's `[precompute]`, its summary printed by process 0.
fn run_precompute(
    job: &JobFile,
    io: &std::sync::Arc<Io>,
    ledger: &mut Ledger,
    config: &schemas::PrecomputeConfig,
) -> Result<()> {
    tracing::info!(
        "precompute: {} of the features of {} over the edges of {}, {} workers x {} processes",
        config.model.formula(),
        schemas::redact(&config.nodes),
        schemas::redact(&config.edges),
        job.cluster.threads(),
        job.cluster.processes
    );
    let result = graphinfer::precompute::run(io, config, &job.cluster)
        .map_err(|f| Exit::stage(f, graphinfer::Error::cause, "precompute failed; this run committed no output"));
    settle_and_print(job, ledger, io, Stage::Precompute, &config.output, result)
}

/// The job's `[flatten]`, its summary printed by process 0.
fn run_flatten(
    job: &JobFile,
    io: &std::sync::Arc<Io>,
    ledger: &mut Ledger,
    config: &schemas::FlattenConfig,
) -> Result<()> {
    tracing::info!(
        "flatten: {} hops, sampler {}, fanouts {:?}, {} workers x {} processes",
        config.hops,
        config.sampler.name(),
        config.recorded_fanouts(),
        job.cluster.threads(),
        job.cluster.processes
    );
    let result = graphflat::run(io, config, &job.cluster)
        .map_err(|f| Exit::stage(f, graphflat::Error::cause, "flatten failed; this run committed no output"));
    settle_and_print(job, ledger, io, Stage::Flatten, &config.output, result)
}

/// Records the end of `stage`, which writes `output`, and on process 0 prints its summary.
fn settle_and_print<T: std::fmt::Display>(
    job: &JobFile,
    ledger: &mut Ledger,
    io: &Io,
    stage: Stage,
    output: &str,
    result: Result<T>,
) -> Result<()> {
    let summary = settle(ledger, io, stage, &[output], result)?;
    if job.cluster.process == 0 {
        println!("{summary}");
        println!("  output:       {output}");
    }
    Ok(())
}

/// The job's `[train]`, its summary printed by process 0.
fn run_train(
    job: &JobFile,
    io: &std::sync::Arc<Io>,
    ledger: &mut Ledger,
    config: &schemas::job::TrainConfig,
) -> Result<()> {
    let input = match config.typed() {
        Some((graph, _)) => format!("the typed [graph] ({} node types)", graph.node_types.len()),
        None => schemas::redact(config.inputs().first().copied().unwrap_or_default()),
    };
    tracing::info!(
        "train: {:?} on {input}, {} epochs, {} workers x {} processes",
        config.model,
        config.epochs,
        job.cluster.threads(),
        job.cluster.processes
    );
    let result = graphtrainer::run(io, config, &job.cluster)
        .map_err(|f| Exit::stage(f, graphtrainer::Error::cause, "train failed; no model was written"));
    let summary = settle(ledger, io, Stage::Train, &[&config.output], result)?;
    if job.cluster.process == 0 {
        print_train(config, &summary);
    }
    Ok(())
}

/// The job's `[infer]`, its summary printed by process 0.
fn run_infer(
    job: &JobFile,
    io: &std::sync::Arc<Io>,
    ledger: &mut Ledger,
    config: &schemas::job::InferConfig,
) -> Result<()> {
    let graph = match config.typed() {
        Some((graph, _)) => format!("the typed [graph] ({} node types)", graph.node_types.len()),
        None => format!("{} and {}", schemas::redact(&config.nodes), schemas::redact(&config.edges)),
    };
    tracing::info!(
        "infer: model {} over {graph}, {} workers x {} processes",
        schemas::redact(&config.model),
        job.cluster.threads(),
        job.cluster.processes
    );
    let result = graphinfer::run(io, config, &job.cluster)
        .map_err(|f| Exit::stage(f, graphinfer::Error::cause, "infer failed; this run committed no output"));
    let mut outputs = vec![config.output.as_str()];
    outputs.extend(config.pairs_output.as_deref());
    let summary = settle(ledger, io, Stage::Infer, &outputs, result)?;
    if job.cluster.process == 0 {
        println!("{summary}");
        println!("  output:       {}", config.output);
        if let Some(pairs_output) = &config.pairs_output {
            println!("  pairs output: {pairs_output}");
        }
    }
    Ok(())
}

fn print_train(config: &schemas::job::TrainConfig, summary: &graphtrainer::TrainSummary) {
    println!("train finished in {:.1}s after {} epochs", summary.seconds, summary.epochs);
    if summary.best_valid.is_nan() {
        println!("  no validation {} (nothing to score it on); the model is the last epoch's", summary.metric);
    } else {
        println!(
            "  best validation {} {:.4} at epoch {}; test {} there {:.4}",
            summary.metric, summary.best_valid, summary.best_epoch, summary.metric, summary.test_at_best
        );
    }
    if summary.exchanged.is_none() {
        println!("  compute waited {:.2}s for data", summary.wait_seconds);
    }
    println!("  settings:     {}", summary.keys);
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let peak = summary.peak_rss.map_or("unknown".into(), |b| format!("{:.0} MB", mb(b)));
    match summary.exchanged {
        None => println!(
            "  peak memory:  {peak} (this process); {:.0} MB of records cached by worker 0",
            mb(summary.cached_bytes)
        ),
        Some(_) => println!("  peak memory:  {peak} (this process)"),
    }
    if let Some(learned) = &summary.learned {
        println!("  learned:      {learned}; the table in {}/embeddings", config.output);
    }
    if let Some(exchanged) = &summary.exchanged {
        println!("  exchanged:    {exchanged}");
    }
    if let Some(histories) = &summary.histories {
        println!("  control variates: {histories}; the model runs over every in-edge");
    }
    let which = match summary.written_epoch == summary.best_epoch && !summary.best_valid.is_nan() {
        true => "the best validation's",
        false => "the last; patience = 0 keeps the last epoch's weights, not the best's",
    };
    println!("  weights of:   epoch {} ({which})", summary.written_epoch);
    println!("  model:        {} (the weights, the description, metrics.jsonl, timings.jsonl)", config.output);
}

fn generated_lines(g: &graphflat::generate::Generated) -> Vec<(String, String)> {
    vec![
        ("nodes".into(), g.nodes.to_string()),
        ("edges".into(), g.edges.to_string()),
        ("largest hub".into(), format!("in-degree {}", g.max_in_degree)),
    ]
}

fn generate(io: &Io, config: &GenerateConfig) -> Result<graphflat::generate::Generated> {
    let started = std::time::Instant::now();
    tracing::info!(
        "generate: {} nodes, {} edges per node into {}",
        config.nodes,
        config.avg_degree,
        schemas::redact(&config.output)
    );
    let generate = if config.hetero { graphflat::hetero::generate_hetero } else { graphflat::generate::generate };
    let g = generate(io, config).map_err(|e| Exit::new(e.cause(), anyhow::Error::new(e).context("generate failed")))?;
    println!(
        "generated {} nodes, {} edges (largest hub: in-degree {}) into {} in {:.1}s",
        g.nodes,
        g.edges,
        g.max_in_degree,
        config.output,
        started.elapsed().as_secs_f64()
    );
    Ok(g)
}
