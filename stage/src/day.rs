//! A stage's day: the graph it reads, and what it keeps beside its output for the next day.
//! A snapshot day reads `nodes` and `edges`, and with `keep_graph` copies them beside the
//! output; a delta day applies `delta_nodes` and `delta_edges` to that kept graph and reads the
//! result ([`crate::kept`]). With `incremental` the run replaces the version it refreshes and
//! keeps every node's digest beside it ([`crate::refresh`]).

use std::sync::Arc;

use schemas::job::changes::Arrival;
use tables::commit::Stage;
use tables::{Error, Io};

use crate::kept::{Kept, Source, keep};
use crate::refresh::state_uri;
use crate::skeleton::Declared;

/// What to do where the digests' place holds what a refresh may not replace (a `_SUCCESS`
/// without a manifest, a file): the place is the stage's, named after the output, so choosing
/// another output directory is not the way.
const STATE_REMEDY: &str = "graphflat keeps a refresh's digests in this folder beside the output, and nothing else \
                            belongs there: delete it, and the run goes in full and writes it again";

/// What a day adds to a stage's declaration.
pub struct Day {
    /// The graph kept or applied, on a day that keeps one or reads a delta.
    pub kept: Option<Kept>,
    /// Where the refresh's digests are kept, with `incremental`.
    pub state: Option<String>,
}

impl Day {
    /// Finds the digests' place (an output with no directory around it has none: a usage
    /// error with `incremental`, before anything is written), then keeps the snapshot or
    /// applies the delta that `arrival` names, before the stage reads its graph.
    pub fn begin(
        timely: &mut timely::worker::Worker,
        io: &Arc<Io>,
        (output, stage): (&str, Stage),
        arrival: &Arrival,
        incremental: bool,
    ) -> Result<Day, Error> {
        let state = incremental.then(|| state_uri(output)).flatten();
        if incremental && state.is_none() {
            return Err(Error::Usage(format!(
                "output {output}: incremental keeps the nodes' digests beside the output, which needs a directory \
                 around it (not a bucket's root, nor `.`: name the directory itself)"
            )));
        }
        let kept = match Source::of(arrival) {
            Some(source) => Some(keep(timely, io, (output, stage), &source)?),
            None => None,
        };
        Ok(Day { kept, state })
    }

    /// `declared` on this day: on a delta day it reads the kept graph; the output names the
    /// slot the graph was kept in; a refresh replaces the version it starts from and keeps its
    /// digests as an extra place.
    pub fn declare<'a>(&'a self, mut declared: Declared<'a>) -> Declared<'a> {
        if let Some(kept) = &self.kept {
            declared.settings = kept.settings(declared.settings);
            if kept.applied.delta.is_some() {
                (declared.nodes, declared.edges) = (&kept.nodes, &kept.edges);
            }
        }
        if let Some(state) = &self.state {
            declared.overwrite = true;
            declared = declared.with_own_extra("the refresh's digests", state, STATE_REMEDY);
        }
        declared
    }

    /// The summary's line on the kept graph.
    pub fn graph_line(&self) -> Option<String> {
        self.kept.as_ref().map(|kept| kept.applied.line())
    }
}
