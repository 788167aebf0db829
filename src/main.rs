//! `graphflat`: runs AGL-style graph learning jobs over Parquet tables.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use graphflat::store::{Io, Place, open_table};
use schemas::{GenerateConfig, JobFile};

#[derive(Parser)]
#[command(
    name = "graphflat",
    version,
    about = "Graph learning as batch jobs over Parquet: flatten k-hop neighborhoods into records",
    long_about = "Graph learning as batch jobs over Parquet files, in the style of Ant Group's AGL.\n\n\
        `graphflat run job.toml` runs the stages a job file names. `generate` and `import` bring \
        graphs in as node and edge tables; `inspect` shows what a table or record set holds.\n\n\
        Logs go to stderr; set RUST_LOG (for example RUST_LOG=debug) to change their level."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the stages of a job file ([generate], [flatten], [train]) in order.
    ///
    /// On several machines, every process runs the same job file with its own --process.
    Run {
        /// The job file (TOML). See jobs/ for commented examples.
        job: PathBuf,
        /// This process's index in [cluster] (overrides the file's `process`).
        #[arg(long)]
        process: Option<usize>,
        /// Worker threads per process (overrides [cluster] workers).
        #[arg(long)]
        workers: Option<usize>,
    },
    /// Write a synthetic graph: power-law in-degrees with hubs, planted communities as labels,
    /// label-correlated features and a train/valid/test split.
    Generate {
        /// Directory that receives nodes/ and edges/ (local path or URI).
        #[arg(long)]
        out: String,
        #[arg(long, default_value_t = 10_000)]
        nodes: u64,
        /// Edges per node on average.
        #[arg(long, default_value_t = 10)]
        avg_degree: u64,
        #[arg(long, default_value_t = 32)]
        feature_dim: usize,
        #[arg(long, default_value_t = 8)]
        classes: usize,
        /// Zipf exponent of in-degrees (larger: bigger hubs).
        #[arg(long, default_value_t = 0.9)]
        skew: f64,
        /// Multi-hot targets (list<float32> labels, one per class) instead of class ids.
        #[arg(long)]
        multi_label: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Import a dataset into node and edge tables.
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
    /// Show a table's or record set's schema, metadata, size and first row.
    Inspect {
        /// A Parquet file or a directory of part files (local path or URI).
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
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run { job, process, workers } => run_job(&job, process, workers),
        Command::Generate { out, nodes, avg_degree, feature_dim, classes, skew, multi_label, seed } => {
            let config = GenerateConfig {
                nodes,
                avg_degree,
                feature_dim,
                classes,
                skew,
                multi_label,
                seed,
                ..GenerateConfig::with_output(out)
            };
            generate(&config)
        }
        Command::Import { format: ImportFormat::Ogb { dir, out, split } } => {
            let io = Io::new()?;
            let imported = graphflat::import::import_ogb(&io, &dir, &out, split.as_deref())
                .with_context(|| format!("importing {}", dir.display()))?;
            println!(
                "imported {} nodes ({} features), {} edges, split {} into {out}",
                imported.nodes,
                imported.feature_dim,
                imported.edges,
                imported.split.as_deref().unwrap_or("(none)")
            );
            Ok(())
        }
        Command::Inspect { table } => inspect(&table),
    }
}

fn run_job(path: &PathBuf, process: Option<usize>, workers: Option<usize>) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading job file {}", path.display()))?;
    let mut job =
        JobFile::parse(&text).map_err(anyhow::Error::msg).with_context(|| format!("in job file {}", path.display()))?;
    if let Some(p) = process {
        job.cluster.process = p;
    }
    if let Some(w) = workers {
        job.cluster.workers = w;
    }
    job.cluster.check().map_err(anyhow::Error::msg)?;
    if job.generate.is_none() && job.flatten.is_none() && job.train.is_none() {
        bail!("{} names no stage: add [generate], [flatten] or [train]", path.display());
    }
    if let Some(config) = &job.generate {
        let io = Io::new()?;
        let out = Place::parse(&config.output)?;
        let done = io.block_on(async {
            out.child("nodes").child(schemas::SUCCESS_MARKER).exists().await
                && out.child("edges").child(schemas::SUCCESS_MARKER).exists().await
        });
        if done {
            tracing::info!("generate: {} already holds a graph; skipping", out.shown());
        } else if job.cluster.process == 0 {
            generate(config)?;
        } else {
            bail!("[generate] runs on process 0 only; run it before starting the other processes");
        }
    }
    if let Some(config) = &job.flatten {
        tracing::info!(
            "flatten: {} hops, sampler {}, fanouts {:?}, {} workers x {} processes",
            config.hops,
            config.sampler.name(),
            config.recorded_fanouts(),
            job.cluster.threads(),
            job.cluster.processes
        );
        let summary = graphflat::run(config, &job.cluster).context("flatten failed; no _SUCCESS was written")?;
        if job.cluster.process == 0 {
            println!("{summary}");
            println!("  output:       {}", config.output);
        }
    }
    if let Some(config) = &job.train {
        tracing::info!(
            "train: {:?} on {}, {} epochs, {} workers x {} processes",
            config.model,
            config.records,
            config.epochs,
            job.cluster.threads(),
            job.cluster.processes
        );
        let summary = graphtrainer::run(config, &job.cluster).context("train failed")?;
        if job.cluster.process == 0 {
            println!("train finished in {:.1}s after {} epochs", summary.seconds, summary.epochs);
            println!(
                "  best validation {} {:.4} at epoch {}; test {} there {:.4}",
                summary.metric,
                summary.best_valid,
                summary.best_epoch + 1,
                summary.metric,
                summary.test_at_best
            );
            println!("  compute waited {:.2}s for data", summary.wait_seconds);
            println!("  model:        {}/model.bpk, model.json, metrics.jsonl", config.output);
        }
    }
    Ok(())
}

fn generate(config: &GenerateConfig) -> Result<()> {
    let io = Io::new()?;
    let started = std::time::Instant::now();
    tracing::info!("generate: {} nodes, {} edges per node into {}", config.nodes, config.avg_degree, config.output);
    let g = graphflat::generate::generate(&io, config).context("generate failed")?;
    println!(
        "generated {} nodes, {} edges (largest hub: in-degree {}) into {} in {:.1}s",
        g.nodes,
        g.edges,
        g.max_in_degree,
        config.output,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn inspect(table: &str) -> Result<()> {
    let io = Io::new()?;
    let place = Place::parse(table)?;
    let files = open_table(&io, &place)?;
    let marker = io.block_on(place.child(schemas::SUCCESS_MARKER).exists());
    let rows: u64 = files.iter().map(|f| f.rows()).sum();
    let bytes: u64 = files.iter().map(|f| f.meta.size).sum();
    let schema = files[0].arrow.schema();
    println!(
        "{}: {} rows in {} files, {:.1} MB, _SUCCESS {}",
        place.shown(),
        rows,
        files.len(),
        bytes as f64 / 1e6,
        if marker { "present" } else { "MISSING (readers ignore this directory)" }
    );
    println!("schema:");
    for field in schema.fields() {
        println!("  {}: {}{}", field.name(), field.data_type(), if field.is_nullable() { " (nullable)" } else { "" });
    }
    let mut metadata: Vec<_> = schema.metadata().iter().collect();
    metadata.sort();
    for (k, v) in metadata {
        println!("  metadata {k} = {v}");
    }
    if let Some(file) = files.iter().find(|f| f.rows() > 0) {
        let mut shown = false;
        file.read_row_group(&io, 0, |batch, _| {
            if !shown && batch.num_rows() > 0 {
                shown = true;
                println!("first row:");
                for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                    let value = arrow_cast_display(column.as_ref());
                    println!("  {}: {}", field.name(), value);
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The first value of a column, shortened for a terminal.
fn arrow_cast_display(column: &dyn arrow_array::Array) -> String {
    let text = format!("{:?}", column.slice(0, 1));
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.len() > 160 { format!("{}...", &flat[..160]) } else { flat }
}
