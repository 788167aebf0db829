//! Checkpoints: each worker's parameters, its server shard (with optimizer state), the epoch to
//! continue from and the best-so-far tracker, written every `checkpoint_every` epochs. Resuming
//! needs every worker's checkpoint of the same epoch, written by the same number of workers;
//! all workers check that together and fail together.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
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

fn path(output: &Path, worker: usize) -> PathBuf {
    output.join("checkpoints").join(format!("worker-{worker:05}.json"))
}

impl Checkpoint {
    pub fn save(&self, output: &Path, worker: usize) -> Result<(), Error> {
        let path = path(output, worker);
        let io = |e: std::io::Error| Error::Output(format!("{}: {e}", path.display()));
        std::fs::create_dir_all(path.parent().expect("has a parent")).map_err(io)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self).map_err(|e| Error::Internal(e.to_string()))?).map_err(io)?;
        // Rename last, so a crash never leaves a half-written checkpoint in place.
        std::fs::rename(&tmp, &path).map_err(io)
    }

    fn load(output: &Path, worker: usize) -> Result<Option<Self>, Error> {
        let path = path(output, worker);
        if !path.exists() {
            return Ok(None);
        }
        let bad = |e: String| Error::Resume(format!("{}: {e}", path.display()));
        let bytes = std::fs::read(&path).map_err(|e| bad(e.to_string()))?;
        serde_json::from_slice(&bytes).map(Some).map_err(|e| bad(format!("not a checkpoint: {e}")))
    }

    /// This worker's checkpoint to resume from, once every worker has found one that fits.
    pub fn resume(worker: &mut Worker, output: &Path) -> Result<Checkpoint, Error> {
        let (index, peers) = (worker.index(), worker.peers());
        let mine = Checkpoint::load(output, index);
        let found = mine.as_ref().ok().and_then(|c| c.as_ref().map(|c| (c.epoch, c.workers)));
        // A checkpoint for a worker this job does not have: it was written by more workers.
        let extra = index == 0 && path(output, peers).exists();
        let all = cluster::all_gather(worker, vec![(index, found, extra)]);
        let mine = mine?;
        let dir = output.join("checkpoints");
        if all.iter().all(|(_, f, _)| f.is_none()) {
            return Err(Error::Resume(format!(
                "resume = true, but {} holds no checkpoint (set checkpoint_every to write them, or run without resume)",
                dir.display()
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
                dir.display()
            )));
        }
        mine.ok_or_else(|| Error::Internal("a checkpoint vanished while resuming".into()))
    }
}
