//! GraphInfer's side of a refresh (`[infer] incremental = true`, `docs/refresh.md`; the phases
//! are `stage::refresh`'s): which settings shape the rows, the columns that name a row's node,
//! and yesterday's parts written again through this stage's part writer.
//!
//! A row of node `v` is its layer-k output (or the embedding layer's, which is earlier), a
//! function of `v`'s k-hop sampled tree: the rule GraphFlat's records follow, with k the
//! model's layers. The rows a refresh computes are the affected nodes'; the plan then computes
//! at each layer only the nodes those need (`crate::plan`), as for `targets` of some splits,
//! and a node's bits do not depend on which others are computed beside it (transforms padded
//! to `batch_size` rows, in-edges folded in rank order, hubs split by their in-edge count).
//!
//! With `pairs`, every candidate is scored again from every node's last layer: the affected
//! nodes' computed today, the others' read back from yesterday's rows ([`pairs_in_full`] says
//! when the rows hold them), which are the same bits.

use arrow_schema::SchemaRef;
use parquet::file::properties::WriterProperties;
use sampling::affected::Affected;
use sampling::{NodeStore, agree};
use schemas::InferConfig;
use schemas::ids::StringIds;
use stage::Worker;
use stage::refresh::carry::Rewrite;
use stage::refresh::{Base, Carried, Key, Qualify, Refreshed, RowSink, TypeOf};
use tables::commit::Stage;
use tables::parts::{PartWriter, PartsOf};
use tables::staging::StagedPart;

use crate::Error;
use crate::output::{NODE_ID, NODE_TYPE};

/// Settings that change no row besides those no stage compares
/// (`stage::refresh::Qualify::not_compared`): the candidate pairs and where their scores go
/// (every candidate is scored again each run). Every other key must equal the previous run's,
/// the batch size and the hub threshold too: they shape how a row's sums are taken.
const NOT_IN_ROWS: &[&str] = &["pairs", "pairs_output"];

/// What a previous version must be for a refresh of `config`'s rows with `schema` (whose
/// metadata names the model's training run).
pub fn qualify<'a>(config: &InferConfig, schema: &'a SchemaRef) -> Qualify<'a> {
    Qualify {
        stage: Stage::Infer,
        settings: serde_json::to_value(config).unwrap_or_default(),
        not_compared: NOT_IN_ROWS,
        schema,
        schema_holds: "another model or training run, embedding layer, width or id kind, or node strings that \
                       shared a hash",
        rows: "rows",
        full_past: FULL_PAST,
    }
}

/// A refresh of GraphInfer's rows that would compute more than 1 in this many again runs in
/// full. Lower than GraphFlat's: a row computed again needs its in-neighbors' earlier layers
/// too, so the work grows faster than the affected share (BENCHMARKS.md, section 25: at 24% of
/// the rows affected a refresh took 1.1-1.4x a full run, at 3.3% 0.97-1.03x).
const FULL_PAST: u64 = 10;

/// The node a row is about: `node_id` (its string in a graph keyed by strings, whose internal
/// id today's table `strings` gives), and in a typed graph `node_type` by the graph's type
/// names.
pub fn key(types: Option<Vec<String>>, strings: Option<StringIds>) -> Key {
    let node_type = match types {
        None => TypeOf::Fixed(None),
        Some(types) => TypeOf::Column { name: NODE_TYPE, types },
    };
    Key { id: NODE_ID, node_type, strings }
}

/// What a refresh adds to the rows a run writes.
#[derive(Default)]
pub struct Refresh {
    pub refreshed: Refreshed,
    /// This worker's parts of today's digests.
    pub state: Vec<StagedPart>,
    /// Over a previous version: what became of this worker's share of yesterday's parts, and
    /// the writer of those written again (finished).
    pub partial: Option<(Carried, PartWriter)>,
    /// With `pairs`, over a previous version: yesterday's last layer of this worker's nodes,
    /// by slot (see [`pairs_in_full`]).
    pub last: Option<Vec<f32>>,
}

/// Why a job with `pairs` computes every row, or `None`: its candidates are scored from every
/// node's last layer, and a refresh computes only the affected nodes'. The others' are
/// yesterday's rows, read back, when the rows hold every node's last layer: `embedding` the
/// last layer (a link model's default) and every node a row (`targets = "all"`).
pub fn pairs_in_full(embedding_is_last: bool, every_node_a_row: bool) -> Option<&'static str> {
    match (embedding_is_last, every_node_a_row) {
        (true, true) => None,
        (false, _) => Some("a job with `pairs` scores every node's last layer, and the rows hold an earlier one"),
        (true, false) => Some("a job with `pairs` scores every node's last layer, and the rows hold only the targets'"),
    }
}

/// Why a refresh computes every row though a version qualifies, or `None`.
///
/// Rows keyed by strings are found by their strings, whose internal ids today's table gives.
/// A string that shared its hash with another's yesterday had an id of that day's numbering
/// (`schemas::ids`), which today's table may not give it again; so a day whose table has such
/// strings runs in full, and so does the day after (the count is in the rows' metadata, which
/// a refresh must find unchanged: [`COLLIDED_STRINGS`]). Without them every string's id is its
/// hash on both days, and its row is found as an integer id's.
pub fn in_full(nodes: &NodeStore) -> Option<String> {
    let collided = nodes.strings.as_ref().map_or(0, |s| s.ids.collided());
    (collided > 0).then(|| {
        format!(
            "{collided} node strings share their hash with another's today, and rows keyed by strings are then \
             computed in full (their internal ids depend on the day's table)"
        )
    })
}

/// The metadata key of the rows of a graph keyed by strings: how many of the day's node
/// strings shared their hash with another's (see [`in_full`]).
pub const COLLIDED_STRINGS: &str = "graphinfer.collided_strings";

/// Yesterday's parts of this worker's share of `base`, carried or written again without the
/// rows whose node `affected` holds, through a part writer named as worker `peers + index` of
/// this run (apart from the rows computed today).
pub fn carry(
    worker: &mut Worker,
    (base, key): (Base, &Key),
    affected: &Affected,
    (output, schema): (&PartsOf, &SchemaRef),
    (props, part_limit): (WriterProperties, u64),
) -> Result<(Carried, PartWriter), Error> {
    let (index, peers) = (worker.timely.index(), worker.timely.peers());
    let to = PartsOf { worker: peers + index, ..output.clone() };
    let mut sink = Parts(PartWriter::new(worker.io.clone(), to, schema.clone(), props, part_limit));
    let carried = stage::refresh::carry_parts(worker.io, &base.parts, key, affected, schema, &mut sink)
        .map_err(|e| match e {
            Rewrite::Failed(e) => e,
            Rewrite::Stopped => Error::Internal("the part writer stopped".into()),
        })
        .and_then(|carried| sink.0.finish().map(|()| carried));
    let carried = agree(worker.timely, carried)?;
    Ok((carried, sink.0))
}

/// The part writer as the sink of rows written again (row groups cut by size, as today's).
struct Parts(PartWriter);

impl RowSink for Parts {
    fn push(&mut self, rows: arrow_array::RecordBatch) -> Result<(), Rewrite> {
        Ok(self.0.write(&rows)?)
    }

    fn end_row_group(&mut self) -> Result<(), Rewrite> {
        Ok(())
    }
}
