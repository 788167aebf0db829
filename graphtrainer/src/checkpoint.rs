//! Checkpoints: each worker's parameters, its server shard (with optimizer state), the epoch to
//! continue from, the best-so-far tracker and the metrics and timings lines so far, written
//! every `checkpoint_every` epochs as `checkpoints/checkpoint-<run>-<worker>.json` (one put
//! each). A run writes only under its own name, so a killed run never touches a committed
//! model's checkpoints; the commit removes the checkpoints of runs that have ended (see
//! `tables::commit`).
//!
//! Resuming takes the newest run's checkpoints, and needs every worker's checkpoint of the
//! same epoch, written by the same number of workers; all workers check that together and fail
//! together.

use serde::{Deserialize, Serialize};
use tables::names::{RUN_ID_LEN, run_of};
use tables::{Io, Place};
use timely::worker::Worker;

use crate::error::Error;
use crate::ps::ShardState;
use crate::tracker::Tracker;

/// The directory of a training output's checkpoints.
pub const DIR: &str = "checkpoints";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Epochs done.
    pub epoch: usize,
    /// Workers of the run that wrote it.
    pub workers: usize,
    pub params: Vec<f32>,
    pub shard: ShardState,
    pub tracker: Tracker,
    /// `metrics.jsonl` and `timings.jsonl` up to this epoch (worker 0's; empty elsewhere).
    #[serde(default)]
    pub metrics: String,
    #[serde(default)]
    pub timings: String,
    /// A model with learned rows: the object in the checkpoints directory holding this
    /// worker's share of the table at this epoch (`crate::learned::checkpoint`).
    #[serde(default)]
    pub learned_rows: Option<String>,
}

/// The directory of a training output's checkpoints.
pub fn dir(output: &Place) -> Place {
    output.child(DIR)
}

fn place(output: &Place, run: &str, worker: usize) -> Place {
    dir(output).child(&format!("checkpoint-{run}-{worker:05}.json"))
}

impl Checkpoint {
    /// Writes this worker's checkpoint of run `run` in one put: a crash never leaves half of
    /// one in place.
    pub fn save(&self, io: &Io, output: &Place, run: &str, worker: usize) -> Result<(), Error> {
        let bytes = serde_json::to_vec(self).map_err(|source| tables::Error::Encode { what: "checkpoint", source })?;
        Ok(io.block_on(place(output, run, worker).put(bytes))?)
    }

    /// The most bytes a checkpoint of a model of `params` parameters can take: the parameters,
    /// the server shard's values and two optimizer moments, and the best-so-far parameters (at
    /// most 5 floats a parameter, each at most 16 bytes of JSON), and the metrics and timings
    /// lines (64 MB: hundreds of thousands of epochs).
    fn limit(params: usize) -> u64 {
        5 * 16 * params as u64 + (64 << 20)
    }

    fn load(io: &Io, place: &Place, params: usize) -> Result<Option<Self>, Error> {
        // A store that fails is the store's error (75 when remote: retry), not a missing checkpoint.
        // A FIFO would block the read, a huge file fill memory: neither is read.
        let Some(bytes) = io.block_on(place.get_at_most(Self::limit(params)))? else { return Ok(None) };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Resume(format!("{}: not a checkpoint this version reads: {e}", place.shown())))
    }

    /// The newest run with a checkpoint in `output`.
    fn newest_run(io: &Io, output: &Place) -> Result<Option<String>, Error> {
        let files = io.block_on(dir(output).list_files())?;
        Ok(files
            .iter()
            .filter_map(|f| f.location.filename().and_then(run_of).map(str::to_owned))
            .filter(|run| run.len() == RUN_ID_LEN)
            .max())
    }

    /// This worker's checkpoint to resume from, once every worker has found one that fits, for
    /// a model of `params` parameters.
    pub fn resume(worker: &mut Worker, io: &Io, output: &Place, params: usize) -> Result<Checkpoint, Error> {
        let (index, peers) = (worker.index(), worker.peers());
        let newest = if index == 0 { Self::newest_run(io, output) } else { Ok(None) };
        let run = cluster::broadcast(worker, (index == 0).then(|| newest.as_ref().ok().cloned().flatten()));
        let mine = match &run {
            Some(Some(run)) => Checkpoint::load(io, &place(output, run, index), params),
            _ => newest.map(|_| None),
        };
        let found = mine.as_ref().ok().and_then(|c| c.as_ref().map(|c| (c.epoch, c.workers)));
        // A checkpoint for a worker this job does not have: it was written by more workers.
        let extra = index == 0 && matches!(&run, Some(Some(run)) if io.block_on(place(output, run, peers).exists()));
        let all = cluster::all_gather(worker, vec![(index, found, extra)]);
        let mine = mine?;
        let dir = dir(output).shown();
        if all.iter().all(|(_, f, _)| f.is_none()) {
            return Err(Error::Resume(format!(
                "resume = true, but {dir} holds no checkpoint (set checkpoint_every to write them, or run without resume)"
            )));
        }
        let epochs: Vec<usize> = all.iter().filter_map(|(_, f, _)| f.map(|(e, _)| e)).collect();
        let fits = all.iter().all(|(_, f, extra)| f.is_some_and(|(_, w)| w == peers) && !extra)
            && epochs.windows(2).all(|w| w[0] == w[1]);
        if !fits {
            return Err(Error::Resume(format!(
                "the checkpoints in {dir} do not fit this job: they must come from one epoch of a run with the same \
                 number of workers ({peers} here: [cluster] workers x processes)"
            )));
        }
        mine.ok_or_else(|| Error::Internal("a checkpoint vanished while resuming".into()))
    }
}
