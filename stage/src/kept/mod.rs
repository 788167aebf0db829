//! The graph a stage keeps beside its output, so that the runs after it can take delta tables
//! instead of a full snapshot (`keep_graph`, `delta_nodes`, `delta_edges`; `docs/refresh.md`,
//! "Delta tables"; the contract in `schemas/README.md`).
//!
//! Two slots of two tables beside the output `<name>`, `.<name>.graphflat-nodes-a/` and
//! `.<name>.graphflat-edges-a/`, and the same with `-b`. The output's manifest names the
//! current slot (its settings' `kept_graph`): the graph as the run that wrote the output read
//! it. A run that keeps a graph writes the other slot: a day that starts over from a snapshot
//! copies it there, file by file; a delta day writes there the current slot with the delta
//! applied: a kept part that holds no row the delta names is copied as it is (a link on a local disk, a server-side copy on a store), one that holds
//! some is written again without them, and the delta's upserts come as parts of their own
//! ([`delta`] says which rows a delta replaces). The stage then reads the graph from that slot,
//! so a refresh over it (`incremental`) finds the changed nodes by their digests, as from a
//! snapshot, and its output is what a full run over the same graph writes.
//!
//! **Why two slots.** The new slot is committed before the stage computes anything (as a run of
//! its own, both tables together: `tables::commit::commit_all`), because the stage reads it;
//! it becomes the current one only when the output commits, naming it. A run that fails after
//! the slot's commit (a delta row the graph's checks refuse, an output that refuses the
//! commit, a kill) leaves the current slot and the output as they were, and the next run
//! writes the other slot again from the current one. Each process opens the same versions
//! (`sampling::one_run`), worker 0 holds both tables' leases, and the files are split among
//! the workers; every worker reads the delta's keys.

pub mod apply;
pub mod delta;

use std::sync::Arc;

use cluster::{all_gather, broadcast};
use sampling::{agree, one_run};
use schemas::ids::IdKind;
use schemas::job::changes::Arrival;
use schemas::{BadInput, Location};
use tables::commit::{Manifest, Pending, Stage, check_own_output, commit_all, new_run_id};
use tables::lease::Lease;
use tables::names::Layout;
use tables::parts::PartsOf;
use tables::{Error, Io, ParquetFile, Place};

use apply::{Done, Table};
use delta::{Changes, OP};

/// What the kept tables' directories add to the output's name, before the slot.
const SUFFIXES: [&str; 2] = [".graphflat-nodes", ".graphflat-edges"];

/// The output's settings key that names the current slot.
pub const SLOT_KEY: &str = "kept_graph";
const TABLES: [Table; 2] = [Table::Nodes, Table::Edges];

/// Where a run's graph comes from, when it keeps one.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A full snapshot, copied into the kept tables.
    Snapshot { nodes: &'a str, edges: &'a str },
    /// Changes to the kept tables (either may be absent: no change to that table).
    Delta { nodes: Option<&'a str>, edges: Option<&'a str> },
}

impl<'a> Source<'a> {
    /// What a section's keys ask for; `None`: the graph is read from `nodes` and `edges` and
    /// not kept.
    pub fn of(arrival: &Arrival<'a>) -> Option<Source<'a>> {
        match (arrival.is_delta(), arrival.keep_graph) {
            (true, _) => Some(Source::Delta { nodes: arrival.delta_nodes, edges: arrival.delta_edges }),
            (false, true) => Some(Source::Snapshot { nodes: arrival.nodes, edges: arrival.edges }),
            (false, false) => None,
        }
    }

    /// The tables it reads, by kept table (`None`: none).
    fn tables(&self) -> [Option<&'a str>; 2] {
        match *self {
            Source::Snapshot { nodes, edges } => [Some(nodes), Some(edges)],
            Source::Delta { nodes, edges } => [nodes, edges],
        }
    }
}

/// The kept graph the stage reads, and what making it did.
#[derive(Debug, Clone)]
pub struct Kept {
    pub nodes: String,
    pub edges: String,
    /// The slot written: the output's manifest names it once the output commits.
    pub slot: String,
    pub applied: Applied,
}

impl Kept {
    /// The output's settings, naming this run's slot as the current one.
    pub fn settings(&self, mut settings: serde_json::Value) -> serde_json::Value {
        if let Some(object) = settings.as_object_mut() {
            object.insert(SLOT_KEY.into(), self.slot.clone().into());
        }
        settings
    }
}

/// What making the kept graph did, the same on every worker, for the summary.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub run: String,
    /// The slot written.
    pub slot: String,
    /// A delta day: the node and edge delta rows applied.
    pub delta: Option<(u64, u64)>,
    /// Kept parts copied as they are, and written again (without `dropped` rows); parts
    /// written in all (those, a snapshot's copy, the delta's upserts).
    pub copied: u64,
    pub rewritten: u64,
    pub dropped: u64,
    pub written: u64,
    /// How long making and committing it took.
    pub seconds: f64,
}

impl Applied {
    /// The summary's line.
    pub fn line(&self) -> String {
        match self.delta {
            None => format!(
                "the snapshot copied beside the output in {:.2}s (run {}, slot {}, {} parts)",
                self.seconds, self.run, self.slot, self.written
            ),
            Some((nodes, edges)) => format!(
                "{nodes} node and {edges} edge delta rows applied in {:.2}s (run {}, slot {}): {} parts copied as \
                 they are, {} written again without {} rows, {} parts in all",
                self.seconds, self.run, self.slot, self.copied, self.rewritten, self.dropped, self.written
            ),
        }
    }
}

/// Makes the kept graph of the output `output` from `source` and commits it into the slot
/// that is not the current one (see the module doc); every worker of every process calls it,
/// in step.
pub fn keep(
    timely: &mut timely::worker::Worker,
    io: &Arc<Io>,
    (output, stage): (&str, Stage),
    source: &Source,
) -> Result<Kept, Error> {
    let started = std::time::Instant::now();
    let bad_place = || {
        Error::Usage(format!(
            "output {output}: keep_graph and delta tables keep the graph beside the output, which needs a directory \
             around it (not a bucket's root)"
        ))
    };
    let current = current_slot(timely, io, output)?;
    let slot = if current.as_deref() == Some("a") { "b" } else { "a" };
    let uris = |slot: &str| SUFFIXES.map(|s| crate::refresh::beside(output, &format!("{s}-{slot}")));
    let [Some(nodes), Some(edges)] = uris(slot) else { return Err(bad_place()) };
    let from = match (source, &current) {
        (Source::Snapshot { .. }, _) => None,
        (Source::Delta { .. }, Some(current)) => match uris(current) {
            [Some(nodes), Some(edges)] => Some([nodes, edges]),
            _ => return Err(bad_place()),
        },
        (Source::Delta { .. }, None) => return Err(no_kept_graph(output)),
    };
    let places = agree(timely, places(io, [&nodes, &edges], from.as_ref(), source))?;
    let (leases, run) = take_leases(timely, io, &places, stage)?;
    let base = agree(timely, open_base(io, &places, source))?;
    for (place, version) in places.from.iter().zip(&base.runs) {
        one_run(timely, place, version.clone())?;
    }
    let changes = agree(timely, read_changes(io, &base))?;
    let done = agree(timely, write_share(timely, io, (&places, &run), &base, changes.as_ref()))?;
    let done = all_gather(timely, vec![done]);
    let tables: [Done; 2] = [0, 1].map(|t| merged(done.iter().map(|d| &d[t])));
    let committed = leases.map(|leases| io.block_on(commit(&places, (leases, &run), stage, &tables)));
    agree(timely, committed.transpose())?;
    let applied = Applied {
        run,
        slot: slot.into(),
        delta: changes.as_ref().map(|c| (c.node_rows, c.edge_rows)),
        copied: tables.iter().map(|t| t.copied).sum(),
        rewritten: tables.iter().map(|t| t.rewritten).sum(),
        dropped: tables.iter().map(|t| t.dropped).sum(),
        written: tables.iter().map(|t| t.staged.len() as u64).sum(),
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok(Kept { nodes, edges, slot: slot.into(), applied })
}

/// The slot the output's manifest names (read by worker 0, shared with every worker); `None`
/// where the output holds no version, or one that kept no graph.
fn current_slot(timely: &mut timely::worker::Worker, io: &Io, output: &str) -> Result<Option<String>, Error> {
    let read = (timely.index() == 0).then(|| {
        let place = io.output(output)?;
        let manifest = io.block_on(tables::manifest::read_manifest(&place))?;
        let slot = manifest.and_then(|m| m.settings.get(SLOT_KEY).and_then(|s| s.as_str()).map(str::to_owned));
        Ok(slot.filter(|s| s == "a" || s == "b"))
    });
    let read = agree(timely, read.transpose())?;
    Ok(broadcast(timely, read.map(|slot| slot.unwrap_or_default())).filter(|s| !s.is_empty()))
}

/// The error of a delta day with no kept graph.
fn no_kept_graph(output: &str) -> Error {
    Error::NoInput(format!(
        "delta_nodes, delta_edges: a delta applies to the graph a previous run kept beside the output, and \
         {output}'s committed version kept none: run once with nodes, edges and keep_graph = true"
    ))
}

/// The kept tables' places (the slot written), those of the current slot a delta applies to,
/// and the tables the source reads into each.
struct Places {
    kept: [Place; 2],
    from: Vec<Place>,
    inputs: [Option<Place>; 2],
}

fn places(io: &Io, kept: [&str; 2], from: Option<&[String; 2]>, source: &Source) -> Result<Places, Error> {
    let kept = [io.output(kept[0])?, io.output(kept[1])?];
    let from = from.map_or(Ok(Vec::new()), |f| f.iter().map(|uri| io.place(uri)).collect())?;
    let [nodes, edges] = source.tables();
    let input = |uri: Option<&str>| uri.map(|u| io.place(u)).transpose();
    Ok(Places { kept, from, inputs: [input(nodes)?, input(edges)?] })
}

/// Worker 0 checks both kept tables as outputs of `stage` (apart from every input) and takes
/// their leases under a new run id, which every worker gets.
fn take_leases(
    timely: &mut timely::worker::Worker,
    io: &Io,
    places: &Places,
    stage: Stage,
) -> Result<(Option<[Lease; 2]>, String), Error> {
    let leases = (timely.index() == 0).then(|| {
        io.block_on(async {
            let inputs: Vec<&Place> = places.inputs.iter().flatten().chain(&places.from).collect();
            for kept in &places.kept {
                check_own_output(kept, &inputs, stage, true, &Layout::TABLE).await?;
            }
            let run = new_run_id();
            let nodes = Lease::take(&places.kept[0], &run, stage.name()).await?;
            Ok([nodes, Lease::take(&places.kept[1], &run, stage.name()).await?])
        })
    });
    let leases = agree(timely, leases.transpose())?;
    let run = broadcast(timely, leases.as_ref().map(|l| l[0].run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id for the kept graph".into()))?;
    Ok((leases, run))
}

/// What the new version starts from: by kept table, the files copied or filtered, and the runs
/// of the kept version (empty for a snapshot).
struct Base {
    files: [Vec<ParquetFile>; 2],
    deltas: [Vec<ParquetFile>; 2],
    runs: Vec<String>,
    delta: bool,
}

fn open_base(io: &Io, places: &Places, source: &Source) -> Result<Base, Error> {
    let open = |place: &Option<Place>| place.as_ref().map_or(Ok(Vec::new()), |p| tables::open_table(io, p));
    if let Source::Snapshot { .. } = source {
        let files = [open(&places.inputs[0])?, open(&places.inputs[1])?];
        return Ok(Base { files, deltas: [Vec::new(), Vec::new()], runs: Vec::new(), delta: false });
    }
    let mut versions = Vec::with_capacity(2);
    for (place, table) in places.from.iter().zip(TABLES) {
        let Some(version) = tables::open_version(io, place)? else {
            return Err(Error::NoInput(format!(
                "delta_{}: the kept {} table {} named by the output holds no version: run once with nodes, edges \
                 and keep_graph = true",
                table.name(),
                table.name(),
                place.shown()
            )));
        };
        versions.push(version);
    }
    let [nodes, edges] = <[_; 2]>::try_from(versions).unwrap_or_else(|_| unreachable!("two tables"));
    let deltas = [open(&places.inputs[0])?, open(&places.inputs[1])?];
    for (table, (files, kept)) in TABLES.iter().zip(deltas.iter().zip([&nodes.parts, &edges.parts])) {
        same_columns(*table, files, kept)?;
    }
    let runs = vec![nodes.manifest.run.clone(), edges.manifest.run.clone()];
    Ok(Base { files: [nodes.parts, edges.parts], deltas, runs, delta: true })
}

/// Every file of a delta holds the kept table's columns and `op`, no other.
fn same_columns(table: Table, delta: &[ParquetFile], kept: &[ParquetFile]) -> Result<(), Error> {
    let names = |file: &ParquetFile| file.arrow.schema().fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
    let Some(kept) = kept.first().map(names) else { return Ok(()) };
    for file in delta {
        let have = names(file);
        let missing = kept.iter().find(|c| !have.contains(c));
        let extra = have.iter().find(|c| *c != OP && !kept.contains(c));
        let problem = match (missing, extra) {
            (Some(c), _) => Some((c, format!("missing: the kept {} table has this column", table.name()))),
            (None, Some(c)) => {
                Some((c, format!("not a column of the kept {} table ({})", table.name(), kept.join(", "))))
            }
            (None, None) => None,
        };
        if let Some((column, problem)) = problem {
            return Err(BadInput::new(Location::file(file.name()).column(column), problem).into());
        }
    }
    Ok(())
}

/// A delta day's changes (every worker reads all of them); `None` on a snapshot day.
fn read_changes(io: &Io, base: &Base) -> Result<Option<Changes>, Error> {
    if !base.delta {
        return Ok(None);
    }
    let kind = base.files[0].first().map_or(IdKind::Int, |f| id_kind(f, "node_id"));
    Changes::read(io, &base.deltas[0], &base.deltas[1], kind).map(Some)
}

/// The kind of the ids in `column` of a kept part.
fn id_kind(file: &ParquetFile, column: &str) -> IdKind {
    let field = file.arrow.schema().field_with_name(column).ok().cloned();
    field.and_then(|c| IdKind::of(c.data_type())).unwrap_or(IdKind::Int)
}

/// This worker's share of the files: every table's base files, then its delta files, are
/// numbered (the number names the parts written from it) and dealt round the workers.
fn write_share(
    timely: &timely::worker::Worker,
    io: &Arc<Io>,
    (places, run): (&Places, &str),
    base: &Base,
    changes: Option<&Changes>,
) -> Result<[Done; 2], Error> {
    let (index, peers) = (timely.index(), timely.peers());
    let mut done: [Done; 2] = Default::default();
    for (t, table) in TABLES.into_iter().enumerate() {
        let to = |unit: usize| PartsOf { dir: places.kept[t].clone(), run: run.to_owned(), worker: unit };
        let files = &base.files[t];
        for (unit, file) in files.iter().enumerate().filter(|(u, _)| u % peers == index) {
            match changes {
                None => done[t].staged.extend(apply::whole(io, file, to(unit))?),
                Some(changes) => {
                    let kind = id_kind(file, if table == Table::Nodes { "node_id" } else { "src" });
                    apply::carry_or_rewrite(io, (file, table), (changes, kind), to(unit), &mut done[t])?
                }
            }
        }
        for (j, file) in base.deltas[t].iter().enumerate() {
            let unit = files.len() + j;
            if unit % peers == index {
                done[t].staged.extend(apply::upserts(io, file, to(unit))?);
            }
        }
    }
    Ok(done)
}

/// Every worker's [`Done`] of one table, together.
fn merged<'a>(all: impl Iterator<Item = &'a Done>) -> Done {
    let mut merged = Done::default();
    for done in all {
        merged.staged.extend(done.staged.iter().cloned());
        merged.copied += done.copied;
        merged.rewritten += done.rewritten;
        merged.dropped += done.dropped;
    }
    merged
}

/// Worker 0 commits both kept tables, as one run.
async fn commit(
    places: &Places,
    (leases, run): ([Lease; 2], &str),
    stage: Stage,
    tables: &[Done; 2],
) -> Result<(), Error> {
    let pending = leases
        .into_iter()
        .zip(tables.iter().zip(TABLES))
        .zip(&places.kept)
        .map(|((lease, (done, table)), place)| {
            let entries = done.staged.iter().map(|p| p.entry.clone()).collect();
            let settings = serde_json::json!({ "kept_graph": table.name() });
            let mut manifest = Manifest::new(run, stage, entries, settings);
            // One graph: a stage reading it never takes its tables of two runs.
            manifest.together = tables::together::partners_of(place, &places.kept.iter().collect::<Vec<_>>());
            Pending {
                output: place,
                manifest,
                files: done.staged.iter().map(|p| p.file()).collect(),
                layout: &Layout::TABLE,
                lease,
            }
        })
        .collect();
    commit_all(pending, true).await
}
