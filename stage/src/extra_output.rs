//! A stage's extra outputs: tables its body writes besides the main output (GraphInfer's pair
//! scores, `[infer] pairs_output`). Each is an output like the main one:
//!
//! - checked before anything is written: against every input after symlinks, and against the
//!   main output and the extra outputs before it (neither may be or hold the other), then by
//!   `tables::commit::check_output` with the stage's `overwrite`;
//! - held by its own lease under the run's id, and written as parts named by that id;
//! - committed after the main output, together with it (`tables::commit::commit_all`): when a
//!   later manifest cannot be written the earlier ones are taken back, so a failed run leaves
//!   its `_SUCCESS` in no output.

use tables::commit::{Stage, check_output, check_own_output};
use tables::lease::Lease;
use tables::names::Layout;
use tables::{Error, Io, Place};

/// An extra output as the job names it: its key in the job's section and its location.
#[derive(Debug, Clone, Copy)]
pub struct Extra<'a> {
    pub key: &'static str,
    pub uri: &'a str,
    /// For a place the stage chose itself (a refresh's digests, named after the output): what
    /// a refusal to write there advises, in place of choosing another output directory.
    pub remedy: Option<&'static str>,
}

/// An extra output, parsed.
#[derive(Debug, Clone)]
pub struct ExtraPlace {
    pub key: &'static str,
    pub place: Place,
    pub remedy: Option<&'static str>,
}

/// Parses each extra output as an output location (every character as written).
pub fn places(io: &Io, extras: &[Extra]) -> Result<Vec<ExtraPlace>, Error> {
    extras.iter().map(|e| Ok(ExtraPlace { key: e.key, place: io.output(e.uri)?, remedy: e.remedy })).collect()
}

/// Checks each extra output apart from the main output `main`, the extras before it and every
/// input, then as an output (see the module doc).
pub async fn check(
    extras: &[ExtraPlace],
    main: &Place,
    inputs: &[&Place],
    stage: Stage,
    overwrite: bool,
) -> Result<(), Error> {
    for (i, extra) in extras.iter().enumerate() {
        let outputs = std::iter::once(("output", main)).chain(extras[..i].iter().map(|e| (e.key, &e.place)));
        for (key, other) in outputs {
            if extra.place.overlaps(other) {
                return Err(Error::Usage(format!(
                    "{} {} and {key} {}: one is, holds or lies inside the other; choose directories apart",
                    extra.key,
                    extra.place.shown(),
                    other.shown()
                )));
            }
        }
        let layout = &Layout::TABLE;
        let checked = match extra.remedy {
            Some(_) => check_own_output(&extra.place, inputs, stage, overwrite, layout).await,
            None => check_output(&extra.place, inputs, stage, overwrite, layout).await,
        };
        checked.map_err(|e| named(extra, e))?;
    }
    Ok(())
}

/// Takes run `run`'s lease on every extra output.
pub async fn take(extras: &[ExtraPlace], run: &str, stage: &str) -> Result<Vec<Lease>, Error> {
    let mut leases = Vec::with_capacity(extras.len());
    for extra in extras {
        leases.push(Lease::take(&extra.place, run, stage).await?);
    }
    Ok(leases)
}

/// `error` about an extra output, with the job key that names it in front (its cause kept),
/// and its own advice where the stage chose the place.
fn named(extra: &ExtraPlace, error: Error) -> Error {
    let key = extra.key;
    let advised = |m: String| match extra.remedy {
        Some(remedy) if m.contains(tables::guard::ELSEWHERE) => m.replace(tables::guard::ELSEWHERE, remedy),
        Some(remedy) => format!("{m}; {remedy}"),
        None => m,
    };
    match error {
        Error::Usage(m) => Error::Usage(format!("{key}: {}", advised(m))),
        Error::Output(m) => Error::Output(format!("{key}: {}", advised(m))),
        other => other,
    }
}
