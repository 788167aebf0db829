//! The one rule every command that writes an output directory follows before it writes
//! anything (`run` with any stage, `generate`, `import`, `split-edges`, and through
//! [`crate::commit::check_output`] every stage; the Python package's `graphflat.guard` says
//! the same words, and `tests/guard.rs` holds the two to it):
//!
//! 1. a directory that **holds a committed output of another kind** (another stage's, or
//!    another command's) is never replaced, with or without overwrite;
//! 2. a directory **inside a committed output**, or one that **holds a committed output in a
//!    folder of its own**, is never written: the new files would be read with the other
//!    output's rows (pandas reads a directory's folders too);
//! 3. an output **of the same kind** is replaced only with overwrite.
//!
//! And before those, a directory **named as a version that a switch keeps beside an output**
//! (`.<name>.graphflat-<run>`, with `.aside` or `.kept`; see [`crate::switch`]) is never
//! written: the next command over that output removes it. Nor, by a job, one **named as a
//! place a stage keeps beside its output** (`.<name>.graphflat-<what>`: a refresh's digests, a
//! kept graph): that output's next refresh would take it for its own and replace it.
//!
//! A commit asks rule 2 again under its lock, just before its switch ([`apart`]): two runs
//! started together, one writing inside the other's output, both pass the first look.
//!
//! Each refusal is [`Error::Output`] (exit 73), naming what wrote the output there and what
//! was asked. "Committed" means a manifest ([`MANIFEST`], or an earlier version's `_SUCCESS`
//! manifest); a `_SUCCESS` alone is a committed output this project did not write (Spark's,
//! Hadoop's), of another kind by rule 1. A manifest that does not read is replaced only with
//! overwrite (it cannot say its kind, and a user asking to replace it means it).

use crate::error::Error;
use crate::manifest::{Manifest, Stage, read_manifest};
use crate::names::MANIFEST;
use crate::place::Place;

/// What a directory holds, as the guard sees it.
#[derive(Debug)]
pub enum Held {
    /// No committed output.
    Nothing,
    /// A committed output of this project.
    Output(Box<Manifest>),
    /// A `_SUCCESS` without a manifest: another tool's committed output.
    Foreign,
    /// A manifest that does not read (the error's text).
    Unreadable(String),
}

/// What kind of output each stage or command writes, in the words of every refusal.
pub fn kind(stage: Stage) -> &'static str {
    match stage {
        Stage::Flatten => "a record set (written by [flatten])",
        Stage::Train => "a model (written by [train] or save_model)",
        Stage::Infer => "scores (written by [infer])",
        Stage::Generate => "a generated graph table (written by generate)",
        Stage::Import => "an imported graph table (written by import)",
        Stage::SplitEdges => "a split edge table (written by split-edges)",
        Stage::Partition => "a partition table (written by [partition])",
        Stage::Precompute => "a node table of precomputed features (written by [precompute])",
    }
}

/// How every refusal ends: what to do instead (a place the stage chose itself, not the job, ends
/// with its own advice in its place: `stage::extra_output`).
pub const ELSEWHERE: &str = "choose another output directory";

/// How a same-kind refusal ends: the three ways to say overwrite.
const REPLACE: &str =
    "to replace it, set overwrite = true in the job file (--overwrite on the command line, overwrite=True in Python)";

/// Who named an output: the job (or the command line), or the stage itself, beside the
/// output it writes (`.<output>.graphflat-<what>`: a refresh's digests, a kept graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    ByJob,
    ByStage,
}

/// What a stage's own places beside an output add to its name: `.<output>` then this, then
/// what the place keeps (`state`, `nodes-a`; a switch's versions are named so too).
const BESIDE: &str = ".graphflat-";

/// Whether `name` is one graphflat keeps for itself beside an output named `<output>`:
/// `.<output>.graphflat-<what>`. No job may name such an output: a stage that keeps its
/// place there would take a user's table for its own and replace it.
pub fn is_kept_beside(name: &str) -> bool {
    let beside = name.strip_prefix('.').and_then(|n| n.rsplit_once(BESIDE));
    beside.is_some_and(|(output, what)| !output.is_empty() && !what.is_empty())
}

/// Rules 1 to 3 (see the module doc) for `output`, which `asked` is about to write.
pub async fn guard(output: &Place, asked: Stage, overwrite: bool, named: Named) -> Result<(), Error> {
    // On a local disk, where the output really lies: a symlink may lead into another output.
    let real = output.local_dir().and_then(|d| resolved(&d));
    let name = real.as_ref().unwrap_or(output).path.filename().unwrap_or_default().to_owned();
    if named == Named::ByJob && is_kept_beside(&name) && !crate::switch::is_version_name(&name) {
        return Err(Error::Output(format!(
            "{} is named as a place graphflat keeps for itself beside an output (`.<output>.graphflat-<what>`: \
             a refresh's digests, a kept graph), which that output's stages replace; {} is never written \
             there: {ELSEWHERE}",
            output.shown(),
            asker(asked)
        )));
    }
    if output.is_local() && crate::switch::is_version_name(&name) {
        return Err(Error::Output(format!(
            "{} is named as a version graphflat keeps beside an output while it switches or while a reader \
             reads it, which the next command over that output removes; {} is never written there: {ELSEWHERE}",
            output.shown(),
            asker(asked)
        )));
    }
    apart(output, asked).await?;
    may_replace(output, held(output).await, asked, overwrite)
}

/// Rule 2 (see the module doc) alone: `output` neither lies inside a committed output nor
/// holds one in a folder. The commit asks again under its lock, just before its switch: a run
/// that wrote inside or around this one's output, and committed while this one wrote, would
/// otherwise have both outputs' rows read as one (a window of the switch's milliseconds stays,
/// between two switches under two parents' locks).
pub async fn apart(output: &Place, asked: Stage) -> Result<(), Error> {
    let real = output.local_dir().and_then(|d| resolved(&d));
    if let Some((dir, what)) = output_above(real.as_ref().unwrap_or(output)).await {
        return Err(Error::Output(format!(
            "{} lies inside {}, which holds {what}; {} is never written into another output: {ELSEWHERE}",
            output.shown(),
            dir.shown(),
            asker(asked)
        )));
    }
    for folder in folders(output).await? {
        if let Some(what) = committed_here(&folder).await {
            return Err(Error::Output(format!(
                "{} holds {}, which is {what}; {} is never written beside another output: {ELSEWHERE}",
                output.shown(),
                folder.shown(),
                asker(asked)
            )));
        }
    }
    Ok(())
}

/// Whether what `output` holds may be replaced by a run of `asked`: nothing, or an output of
/// the same kind with `overwrite` (one whose manifest does not read, with a warning).
fn may_replace(output: &Place, held: Held, asked: Stage, overwrite: bool) -> Result<(), Error> {
    let asked_kind = kind(asked);
    match held {
        Held::Nothing => Ok(()),
        Held::Output(m) if m.stage == asked && overwrite => Ok(()),
        Held::Output(m) if m.stage == asked => Err(Error::Output(format!(
            "{} already holds {} (run {}); {REPLACE}, or {ELSEWHERE}",
            output.shown(),
            kind(m.stage),
            m.run
        ))),
        Held::Output(m) => Err(Error::Output(format!(
            "{} holds {} (run {}), and {} asked to write {asked_kind}; an output of another kind is never \
             replaced, with or without overwrite: {ELSEWHERE}",
            output.shown(),
            kind(m.stage),
            m.run,
            asked.name()
        ))),
        Held::Foreign => Err(Error::Output(format!(
            "{} holds a committed output that this project did not write (a _SUCCESS without {MANIFEST}); it \
             is never replaced, with or without overwrite: {ELSEWHERE}",
            output.shown()
        ))),
        Held::Unreadable(_) if overwrite => {
            tracing::warn!("{}: replacing an output whose manifest does not read", output.shown());
            Ok(())
        }
        Held::Unreadable(e) => Err(Error::Output(format!(
            "{} holds a committed output whose manifest does not read ({e}); {REPLACE}, or {ELSEWHERE}",
            output.shown()
        ))),
    }
}

/// The nearest directory above `place` that holds a committed output, with what it holds
/// ("a record set (written by [flatten]) (run R)"): a file or directory written there would be
/// read with that output.
pub async fn output_above(place: &Place) -> Option<(Place, String)> {
    let mut above = place.parent();
    while let Some(dir) = above {
        if let Some(what) = committed_here(&dir).await {
            return Some((dir, what));
        }
        above = dir.parent();
    }
    None
}

/// The local path `dir` with every symlink of its longest existing part resolved, as a place.
fn resolved(dir: &std::path::Path) -> Option<Place> {
    let mut existing = dir.to_path_buf();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?.to_path_buf();
    }
    let mut real = std::fs::canonicalize(&existing).ok()?;
    real.extend(rest.iter().rev());
    Place::parse_output(real.to_str()?, &schemas::StorageConfig::default()).ok()
}

/// "generate" or "[flatten]", as the refusals name the one asking.
fn asker(stage: Stage) -> &'static str {
    match stage {
        Stage::Flatten => "[flatten]",
        Stage::Train => "[train]",
        Stage::Infer => "[infer]",
        Stage::Partition => "[partition]",
        Stage::Precompute => "[precompute]",
        Stage::Generate => "generate",
        Stage::Import => "import",
        Stage::SplitEdges => "split-edges",
    }
}

/// What `dir` holds ([`Held`]).
pub async fn held(dir: &Place) -> Held {
    let has = |name: &str| {
        let place = dir.child(name);
        async move { place.exists().await }
    };
    if !has(MANIFEST).await && !has(schemas::SUCCESS_MARKER).await {
        return Held::Nothing;
    }
    match read_manifest(dir).await {
        Ok(Some(m)) => Held::Output(Box::new(m)),
        Ok(None) => Held::Foreign,
        Err(e) => Held::Unreadable(e.to_string()),
    }
}

/// "a record set (written by [flatten]) (run R)" when `dir` holds a committed output.
async fn committed_here(dir: &Place) -> Option<String> {
    match held(dir).await {
        Held::Nothing => None,
        Held::Output(m) => Some(format!("{} (run {})", kind(m.stage), m.run)),
        Held::Foreign => Some("a committed output this project did not write (its _SUCCESS)".into()),
        Held::Unreadable(e) => Some(format!("a committed output whose manifest does not read ({e})")),
    }
}

/// The folders directly under `dir` (none when it does not exist), `_`- and `.`-named ones
/// aside: no reader of a directory reads those.
async fn folders(dir: &Place) -> Result<Vec<Place>, Error> {
    let entries = crate::entries::entries(dir).await?;
    let shown = |name: &str| !name.starts_with(['_', '.']);
    // A symlink to a directory too: pandas follows it.
    let folder =
        |e: &crate::entries::Entry| e.kind == crate::entries::Kind::Dir || e.local.as_ref().is_some_and(|p| p.is_dir());
    let mut names: Vec<String> = entries.into_iter().filter(|e| folder(e) && shown(&e.name)).map(|e| e.name).collect();
    // In name order: the first refused is the same on every file system (and in Python's).
    names.sort();
    Ok(names.iter().map(|name| dir.child(name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Io;
    use schemas::StorageConfig;

    fn place(p: &std::path::Path) -> Place {
        Place::parse_output(p.to_str().unwrap(), &StorageConfig::default()).unwrap()
    }

    fn commit_manifest(dir: &std::path::Path, stage: Stage) {
        std::fs::create_dir_all(dir).unwrap();
        let m = Manifest::new(&crate::names::new_run_id(), stage, Vec::new(), serde_json::Value::Null);
        std::fs::write(dir.join(MANIFEST), m.to_parquet(None).unwrap()).unwrap();
        std::fs::write(dir.join(schemas::SUCCESS_MARKER), b"").unwrap();
    }

    /// Every rule, with an independent expectation per case: another kind is refused whatever
    /// overwrite says, the same kind only without it, an output inside or around another never.
    #[test]
    fn the_rule_per_case() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("tables-guard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        commit_manifest(&dir.join("flat"), Stage::Flatten);
        commit_manifest(&dir.join("graph/nodes"), Stage::Generate);
        std::fs::create_dir_all(dir.join("spark")).unwrap();
        std::fs::write(dir.join("spark/_SUCCESS"), b"").unwrap();
        let check = |p: &str, stage: Stage, overwrite: bool| {
            io.block_on(guard(&place(&dir.join(p)), stage, overwrite, Named::ByJob))
        };
        for overwrite in [false, true] {
            let e = check("flat", Stage::Train, overwrite).unwrap_err().to_string();
            assert!(e.contains("holds a record set (written by [flatten])") && e.contains("train asked"), "{e}");
            assert!(check("flat/sub", Stage::Train, overwrite).unwrap_err().to_string().contains("lies inside"));
            let e = check("graph", Stage::Flatten, overwrite).unwrap_err().to_string();
            assert!(e.contains("graph/nodes, which is a generated graph table"), "{e}");
            assert!(check("spark", Stage::Infer, overwrite).unwrap_err().to_string().contains("did not write"));
            assert!(check("new", Stage::Infer, overwrite).is_ok());
            // A stage's own place beside an output: refused to a job, open to the stage.
            for own in [".flat.graphflat-state", ".flat.graphflat-nodes-a"] {
                let e = check(own, Stage::Flatten, overwrite).unwrap_err().to_string();
                assert!(e.contains("keeps for itself"), "{own}: {e}");
                let own_place = place(&dir.join(own));
                assert!(io.block_on(guard(&own_place, Stage::Flatten, overwrite, Named::ByStage)).is_ok(), "{own}");
            }
            assert!(!is_kept_beside(".graphflat-state") && !is_kept_beside("flat.graphflat-state"));
            assert!(check("graph/edges", Stage::Generate, overwrite).is_ok());
        }
        let e = check("flat", Stage::Flatten, false).unwrap_err();
        assert!(e.to_string().contains("already holds a record set") && e.to_string().contains("overwrite = true"));
        assert_eq!(e.cause(), schemas::Cause::CantCreate);
        assert!(check("flat", Stage::Flatten, true).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_asker_is_named_as_the_job_file_or_command_line_names_it() {
        // The one asking is named in its kind's words.
        for stage in [
            Stage::Flatten,
            Stage::Train,
            Stage::Infer,
            Stage::Partition,
            Stage::Precompute,
            Stage::Generate,
            Stage::SplitEdges,
        ] {
            assert!(kind(stage).contains(&format!("by {}", asker(stage))), "{stage:?}");
        }
    }
}
