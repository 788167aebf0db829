//! Checkpoints: each worker's parameters, its server shard (with optimizer state), the epoch to
//! continue from and the best-so-far tracker, written every `checkpoint_every` epochs. Resuming
//! needs every worker's checkpoint of the same epoch, written by the same number of workers;
//! all workers check that together and fail together.

use serde::{Deserialize, Serialize};
use tables::{Io, Place};
use timely::worker::Worker;

use crate::error::Error;
use crate::ps::ShardState;
use crate::tracker::Tracker;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Epochs done.
    pub epoch: usize,
    /// Workers of the run that wrote it (0 in checkpoints that predate this field).
    #[serde(default)]
    pub workers: usize,
    pub params: Vec<f32>,
    pub shard: ShardState,
    pub tracker: Tracker,
}

/// The directory of a training output's checkpoints.
pub fn dir(output: &Place) -> Place {
    output.child("checkpoints")
}

fn place(output: &Place, worker: usize) -> Place {
    dir(output).child(&format!("worker-{worker:05}.json"))
}

impl Checkpoint {
    /// Writes this worker's checkpoint in one put: a crash never leaves half of one in place.
    pub fn save(&self, io: &Io, output: &Place, worker: usize) -> Result<(), Error> {
        let bytes = serde_json::to_vec(self).map_err(|e| Error::Internal(e.to_string()))?;
        Ok(io.block_on(place(output, worker).put(bytes))?)
    }

    fn load(io: &Io, output: &Place, worker: usize) -> Result<Option<Self>, Error> {
        let place = place(output, worker);
        let bad = |e: String| Error::Resume(format!("{}: {e}", place.shown()));
        let Some(bytes) = io.block_on(place.get()).map_err(|e| bad(e.to_string()))? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| bad(format!("not a checkpoint: {e}")))
    }

    /// This worker's checkpoint to resume from, once every worker has found one that fits.
    pub fn resume(worker: &mut Worker, io: &Io, output: &Place) -> Result<Checkpoint, Error> {
        let (index, peers) = (worker.index(), worker.peers());
        let mine = Checkpoint::load(io, output, index);
        let found = mine.as_ref().ok().and_then(|c| c.as_ref().map(|c| (c.epoch, c.workers)));
        // A checkpoint for a worker this job does not have: it was written by more workers.
        let extra = index == 0 && io.block_on(place(output, peers).exists());
        let all = cluster::all_gather(worker, vec![(index, found, extra)]);
        let mine = mine?;
        let dir = dir(output).shown();
        if all.iter().all(|(_, f, _)| f.is_none()) {
            return Err(Error::Resume(format!(
                "resume = true, but {} holds no checkpoint (set checkpoint_every to write them, or run without resume)",
                dir
            )));
        }
        let epochs: Vec<usize> = all.iter().filter_map(|(_, f, _)| f.map(|(e, _)| e)).collect();
        let writers: Vec<usize> = all.iter().filter_map(|(_, f, _)| f.map(|(_, w)| w)).filter(|&w| w != 0).collect();
        let fits = all.iter().all(|(_, f, extra)| f.is_some() && !extra)
            && epochs.windows(2).all(|w| w[0] == w[1])
            && writers.iter().all(|&w| w == peers);
        if !fits {
            return Err(Error::Resume(format!(
                "the checkpoints in {} do not fit this job: they must come from one epoch of a run with the same \
                 number of workers ({peers} here: [cluster] workers x processes)",
                dir
            )));
        }
        mine.ok_or_else(|| Error::Internal("a checkpoint vanished while resuming".into()))
    }
}
