//! Step 1 of a refresh: the version the output holds, opened by every process, and whether a
//! refresh can start from it.

use arrow_schema::SchemaRef;
use sampling::agree;
use tables::commit::Stage;
use tables::{Error, ParquetFile, Place, Version};

use super::Refreshed;

/// What a version must be for a refresh to start from it.
pub struct Qualify<'a> {
    /// The stage that must have written it.
    pub stage: Stage,
    /// Today's settings: the job's section, serialized as the manifest keeps it.
    pub settings: serde_json::Value,
    /// Keys of `settings` that change no row in this stage (how the work is cut), besides
    /// [`PLACES`]: every other key must equal the previous run's.
    pub not_compared: &'a [&'a str],
    /// Today's schema, metadata included: the previous parts' must be equal.
    pub schema: &'a SchemaRef,
    /// What a schema change means in this stage's words, for the reason a run is full.
    pub schema_holds: &'a str,
    /// What a row is, for the summary: "records", "rows".
    pub rows: &'static str,
    /// A refresh that would compute more than 1 in this many rows again (or whose changes
    /// reach more than 1 in this many nodes) runs in full.
    pub full_past: u64,
}

/// Keys no stage compares: where the graph comes from, where the output goes and how the
/// commit treats it, and how parts are cut.
pub const PLACES: &[&str] = &[
    "nodes",
    "edges",
    "keep_graph",
    "delta_nodes",
    "delta_edges",
    "kept_graph",
    "output",
    "overwrite",
    "incremental",
    "partition",
    "part_size_mb",
];

/// The version a refresh starts from, once it qualifies.
pub struct Base {
    pub run: String,
    /// This worker's share of its parts.
    pub parts: Vec<ParquetFile>,
    /// This worker's share of the parts of the digests that run kept.
    pub(super) state: Vec<ParquetFile>,
    /// Whether those keep task digests (`super::state`), the same on every worker.
    pub tasks_kept: bool,
}

/// The version `output` holds and the digests kept beside it (`kept`), opened on every
/// process (the same version on all, else a retryable error naming both runs), and whether a
/// refresh can start from them: `Err` says why not.
pub(super) fn open(
    worker: &mut crate::Worker,
    output: &Place,
    kept: &Place,
    qualify: &Qualify,
) -> Result<Result<Base, Refreshed>, Error> {
    let version = match open_agreed(worker, output, "the committed version") {
        Ok(Some(version)) => version,
        Ok(None) => return Ok(Err(Refreshed::full("the output holds no committed version yet"))),
        Err(Unreadable(reason)) => return Ok(Err(Refreshed::full(reason))),
        Err(Failed(e)) => return Err(e),
    };
    if let Err(reason) = qualifies(&version, qualify) {
        return Ok(Err(Refreshed::full(reason)));
    }
    let run = version.manifest.run.clone();
    let digests = match open_agreed(worker, kept, "the digests kept beside the output") {
        Ok(Some(digests)) if digests.manifest.run == run => digests,
        Ok(Some(digests)) => {
            let other = digests.manifest.run;
            return Ok(Err(Refreshed::full(format!(
                "the digests beside the output are run {other}'s, not run {run}'s"
            ))));
        }
        Ok(None) => return Ok(Err(Refreshed::full(format!("no digests of run {run} are kept beside the output")))),
        Err(Unreadable(reason)) => return Ok(Err(Refreshed::full(reason))),
        Err(Failed(e)) => return Err(e),
    };
    let (index, peers) = (worker.timely.index(), worker.timely.peers());
    let share = |files: Vec<ParquetFile>| files.into_iter().skip(index).step_by(peers).collect();
    let tasks_kept = digests.parts.first().is_some_and(super::state::keeps_tasks);
    Ok(Ok(Base { run, parts: share(version.parts), state: share(digests.parts), tasks_kept }))
}

/// Why [`open_agreed`] has no version: one that does not read (a refresh then runs in full,
/// saying this), or a failure that ends the job.
enum NotOpened {
    Unreadable(String),
    Failed(Error),
}
use NotOpened::{Failed, Unreadable};

/// The version `place` holds, opened by every worker; every process must have opened the same
/// one (`sampling::one_run`).
fn open_agreed(worker: &mut crate::Worker, place: &Place, what: &str) -> Result<Option<Version>, NotOpened> {
    let version = match agree(worker.timely, tables::open_version(worker.io, place)) {
        Ok(version) => version,
        // A part changed or gone since its commit: the version does not read, and a full run
        // writes the next one without it.
        Err(e) if matches!(e.cause(), schemas::Cause::BadData | schemas::Cause::NoInput) => {
            return Err(Unreadable(format!("{what} cannot be read: {e}")));
        }
        Err(e) => return Err(Failed(e)),
    };
    let run = version.as_ref().map(|v| v.manifest.run.clone()).unwrap_or_default();
    sampling::one_run(worker.timely, place, run).map_err(Failed)?;
    Ok(version)
}

/// Whether a refresh can start from `version` (see [`Qualify`]); `Err` says why not.
fn qualifies(version: &Version, qualify: &Qualify) -> Result<(), String> {
    let manifest = &version.manifest;
    if manifest.stage != qualify.stage {
        return Err(format!("the output holds a {} output", manifest.stage.name()));
    }
    let differing = differing_settings(&manifest.settings, &qualify.settings, qualify.not_compared);
    if !differing.is_empty() {
        let keys = differing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        return Err(format!("run {} was written with another {keys}", manifest.run));
    }
    match version.parts.first() {
        Some(part) if part.arrow.schema() == qualify.schema => Ok(()),
        Some(_) => Err(format!(
            "the {}' schema or metadata changed since run {} ({})",
            qualify.rows, manifest.run, qualify.schema_holds
        )),
        None => Err(format!("run {} lists no parts", manifest.run)),
    }
}

/// The settings (of those not in `not_compared`) whose values differ between `before` and
/// `now`, each as the job's section serialized, in name order.
fn differing_settings(before: &serde_json::Value, now: &serde_json::Value, not_compared: &[&str]) -> Vec<String> {
    let keys = |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    let mut all = keys(before);
    all.extend(keys(now));
    all.sort();
    all.dedup();
    let compared = |k: &String| !not_compared.contains(&k.as_str()) && !PLACES.contains(&k.as_str());
    all.into_iter().filter(compared).filter(|k| before.get(k) != now.get(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_settings_that_shape_rows_must_match() {
        let ignored = ["batch_size"];
        let a = serde_json::json!({"nodes": "day1/nodes", "hops": 2, "fanouts": [10, 5], "batch_size": 10});
        let b = serde_json::json!({"nodes": "day2/nodes", "hops": 2, "fanouts": [10, 5], "batch_size": 99});
        assert!(differing_settings(&a, &b, &ignored).is_empty());
        let c = serde_json::json!({"nodes": "day2/nodes", "hops": 2, "fanouts": [10, 4]});
        assert_eq!(differing_settings(&a, &c, &ignored), ["fanouts"]);
        let d = serde_json::json!({"hops": 3, "fanouts": [10, 5], "seed": 3});
        assert_eq!(differing_settings(&a, &d, &ignored), ["hops", "seed"], "every one is named");
        assert_eq!(differing_settings(&a, &b, &[]), ["batch_size"], "nodes is never compared");
    }
}
