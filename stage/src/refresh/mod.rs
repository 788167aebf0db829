//! The refresh of a stage's output (`incremental = true`, `docs/refresh.md`): over the version
//! of the output that the same stage committed with the same settings, only the rows that
//! today's graph can change are computed again; the others are carried over. GraphFlat's
//! records and GraphInfer's scores share these phases; each stage says which settings shape
//! its rows ([`Qualify`]) and which column names a row's node ([`Key`]).
//!
//! **The phases**, every worker in step:
//!
//! 1. **the previous version** ([`previous`]): every process opens the version the output
//!    holds (and holds it, `tables::pin`); all must have opened the same one. It qualifies
//!    when this stage wrote it with the same settings (those that change no row aside), its
//!    schema and metadata are today's, and it kept its digests;
//! 2. **the affected set** (`sampling::affected`): yesterday's digests against today's on
//!    differential-dataflow, then k hops downstream over today's sampled edges ([`search`]),
//!    and the share of the rows it reaches ([`judge`]; [`plan`] is both, for rows keyed by
//!    their node; GraphFlat's link records, keyed by their source, add the sources whose task
//!    digests changed: `graphflat::refresh`);
//! 3. **the parts** ([`carry`]): of yesterday's parts, one with no affected row is carried
//!    into the new version as it is (a hard link on a local disk, nothing at all on a store:
//!    the manifest lists it again); one with some is written again without them; the stage
//!    computes the affected rows into new parts, as a full run does;
//! 4. **the state** ([`state`]): every run with `incremental` keeps today's digests in a table
//!    of its own beside the output, `.<output>.graphflat-state`, committed with the output as
//!    its extra output (`crate::extra_output`). Not inside it: polars reads every file below
//!    the directory it is given, hidden folders included. A refresh reads the digests only when
//!    their run is the output's.
//!
//! The new version holds exactly one row per target, each what a full run writes: the
//! affected set's are new, the others yesterday's, which `sampling::affected` argues equal.
//! A run that cannot refresh runs in full and says why in its summary.

pub mod carry;
pub mod previous;
pub mod state;

use sampling::affected::Affected;
use sampling::digest::Digest;
use sampling::{NodeStore, agree};
use tables::{Error, Place};

pub use carry::{Carried, Key, RowSink, TypeOf, carry_parts};
pub use previous::{Base, Qualify};
pub use state::{beside, state_uri, write_state};

/// What the refresh did, the same on every worker, for the summary.
#[derive(Debug, Clone, Default)]
pub struct Refreshed {
    /// The run whose version this one refreshed; `None` for a full run.
    pub from: Option<String>,
    /// Why the run was full.
    pub full: Option<String>,
    pub changed: u64,
    /// In a stage that keeps task digests: the sources whose tasks changed.
    pub changed_tasks: Option<u64>,
    pub affected: u64,
    /// Rows today.
    pub targets: u64,
    /// What a row is, for the summary: "records", "rows".
    pub rows: &'static str,
}

impl Refreshed {
    pub fn full(reason: impl Into<String>) -> Self {
        Refreshed { full: Some(reason.into()), ..Refreshed::default() }
    }

    /// This refresh as a full run: more than 1 in `past` rows affected.
    fn too_many(self, past: u64) -> Self {
        let share = 100.0 * self.affected as f64 / self.targets.max(1) as f64;
        Refreshed::full(format!(
            "{} nodes changed since run {}, and {} of {} {} ({share:.1}%) would be computed again: past 1 in \
             {past}, a full run is cheaper",
            self.changed,
            self.from.as_deref().unwrap_or("?"),
            self.affected,
            self.targets,
            self.rows,
        ))
    }

    /// The summary's line.
    pub fn line(&self) -> String {
        match (&self.from, &self.full) {
            (Some(from), _) => format!(
                "incremental over run {from}: {} nodes changed{}, {} of {} {} affected ({:.2}%)",
                self.changed,
                self.changed_tasks.map_or(String::new(), |n| format!(", {n} sources' tasks changed")),
                self.affected,
                self.targets,
                self.rows,
                100.0 * self.affected as f64 / self.targets.max(1) as f64
            ),
            (None, Some(reason)) => format!("full: {reason}"),
            (None, None) => "full".into(),
        }
    }
}

/// Steps 1 and 2 for the output (`output`, and `kept`, the place of its digests), today's
/// `nodes` with their `digests`, and this worker's rows' nodes (`rows`): what the refresh is,
/// and, unless it runs in full, the version it starts from and the nodes whose rows a change
/// within `hops` can reach.
pub fn plan(
    worker: &mut crate::Worker,
    places: (&Place, &Place),
    qualify: &Qualify,
    nodes: (&NodeStore, &[Digest]),
    hops: usize,
    rows: &[i64],
) -> Result<(Refreshed, Option<(Base, Affected)>), Error> {
    let found = match search(worker, places, qualify, nodes, hops)? {
        Err(full) => return Ok((full, None)),
        Ok(found) => found,
    };
    let mine = rows.iter().filter(|&&t| found.affected.contains(t)).count() as u64;
    Ok(match judge(worker, qualify, &found, (mine, rows.len() as u64)) {
        Ok(refreshed) => (refreshed, Some((found.base, found.affected))),
        Err(full) => (full, None),
    })
}

/// What steps 1 and 2 found: the version a refresh starts from, the nodes a change can reach,
/// and yesterday's task digests (this worker's share of them; none unless
/// `base.tasks_kept`).
pub struct Found {
    pub base: Base,
    pub affected: Affected,
    pub tasks: Vec<(i64, Digest)>,
}

/// Steps 1 and 2 (see [`plan`]): `Err` when the run is full, saying why.
pub fn search(
    worker: &mut crate::Worker,
    (output, kept): (&Place, &Place),
    qualify: &Qualify,
    (nodes, digests): (&NodeStore, &[Digest]),
    hops: usize,
) -> Result<Result<Found, Refreshed>, Error> {
    let base = match previous::open(worker, output, kept, qualify)? {
        Err(full) => return Ok(Err(full)),
        Ok(base) => base,
    };
    let unreadable = |e: &Error| Refreshed::full(format!("the digests run {} kept cannot be read: {e}", base.run));
    let old = match agree(worker.timely, state::read_digests(worker.io, &base.state)) {
        Err(e) if e.cause() == schemas::Cause::BadData => return Ok(Err(unreadable(&e))),
        Err(e) => return Err(e),
        Ok(old) => old,
    };
    // Past 1 in `past` of the graph's nodes the search stops: the run is then a full one.
    let (total, past) = (cluster::sum(worker.timely, nodes.len() as u64), qualify.full_past);
    let new = nodes.ids.iter().copied().zip(digests.iter().copied());
    let edges = || (0..nodes.len()).flat_map(|slot| nodes.sampled(slot).iter().map(move |e| (e.src, nodes.ids[slot])));
    let affected = sampling::affected::affected(worker.timely, (old.nodes, new), edges, hops, (total / past) as usize);
    if affected.past_limit {
        return Ok(Err(Refreshed::full(format!(
            "{} nodes changed since run {}, and more than 1 in {past} of the graph's {} nodes lie within {hops} \
             hops of them: a full run is cheaper",
            affected.changed, base.run, total
        ))));
    }
    Ok(Ok(Found { base, affected, tasks: old.tasks }))
}

/// Whether a refresh over `found` that computes `mine` of this worker's `rows` again goes on
/// (`Ok`: what it is) or runs in full (`Err`: why): past 1 in `qualify.full_past` of the rows
/// over the cluster, a full run is cheaper. Every worker calls it and gets the same answer.
pub fn judge(
    worker: &mut crate::Worker,
    qualify: &Qualify,
    found: &Found,
    (mine, rows): (u64, u64),
) -> Result<Refreshed, Refreshed> {
    let counts = cluster::all_gather(worker.timely, vec![(mine, rows)]);
    let (hit, all) = counts.iter().fold((0, 0), |(h, a), &(m, t)| (h + m, a + t));
    let refreshed = Refreshed {
        from: Some(found.base.run.clone()),
        full: None,
        changed: found.affected.changed,
        changed_tasks: None,
        affected: hit,
        targets: all,
        rows: qualify.rows,
    };
    match hit > all / qualify.full_past {
        true => Err(refreshed.too_many(qualify.full_past)),
        false => Ok(refreshed),
    }
}

/// Step 3's outcome, `carried` (yesterday's parts carried or written again), as the run goes on:
/// `Some` to refresh, `None` when a part of run `run` did not read (changed after its commit, or
/// not what this stage writes), which makes `refreshed` a full run that says so; other errors
/// end the job. Every worker has the same outcome (the carry's errors are agreed on).
pub fn carried_or_full<T>(carried: Result<T, Error>, run: &str, refreshed: &mut Refreshed) -> Result<Option<T>, Error> {
    match carried {
        Ok(carried) => Ok(Some(carried)),
        Err(e) if e.cause() == schemas::Cause::BadData => {
            *refreshed = Refreshed::full(format!("a part of run {run} cannot be read: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
