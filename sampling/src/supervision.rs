//! Supervision edges of the link task: the edges of the edge table that carry a split (`train`,
//! `valid` or `test`), collected by the map step when a stage asks for them
//! ([`SupervisionSample`]) and kept at the worker that owns their source.
//!
//! What must hold, and why:
//! - **Held out means held out.** Collecting an edge as supervision never makes it a
//!   message-passing edge: `valid` and `test` edges are dropped from the graph whether or not
//!   they are collected (`schemas::edges::passes_messages`); `train` edges are both.
//! - **The same list on any cluster.** Whether an edge is kept is a pure function of the seed and
//!   the edge's endpoints ([`SupervisionSample::keeps`]); the kept edges go to the owner of `src`
//!   (`cluster::Owners`, as nodes do) and are sorted there by `(src, dst, split)`. Parallel
//!   edges are kept as the table has them (one entry each), so a worker's list depends only on
//!   the table, the sample and which nodes the worker owns.

use cluster::Owners;
use cluster::hash::{EdgeDraw, edge_draw};
use cluster::shuffle;
use schemas::Split;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;

/// A supervision edge: an edge of the table with a split, at the owner of `src`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SupervisionEdge {
    pub src: i64,
    pub dst: i64,
    pub split: Split,
}

/// Which supervision edges a stage collects: each edge with a split is kept with probability
/// `fraction`, decided by a hash of `(seed, src, dst)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SupervisionSample {
    fraction: f64,
    seed: u64,
}

impl SupervisionSample {
    /// Every supervision edge.
    pub const ALL: SupervisionSample = SupervisionSample { fraction: 1.0, seed: 0 };

    /// A sample of `fraction` of the supervision edges, in (0, 1].
    pub fn new(fraction: f64, seed: u64) -> Result<Self, Error> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::Usage(format!("the supervision fraction must be in (0, 1], found {fraction}")));
        }
        Ok(SupervisionSample { fraction, seed })
    }

    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whether the edge `src -> dst` is in the sample: a pure function of (seed, src, dst), so
    /// the two directions of an undirected edge are drawn apart.
    pub fn keeps(&self, src: i64, dst: i64) -> bool {
        self.fraction >= 1.0 || edge_draw(EdgeDraw::Supervision, self.seed, src, dst) < self.fraction
    }
}

/// Sends the supervision edges this worker read to the owners of their sources; returns the
/// ones this worker owns, sorted by `(src, dst, split)`.
pub(crate) fn to_owners(
    worker: &mut Worker,
    read: Vec<SupervisionEdge>,
    owners: &Owners,
) -> Result<Vec<SupervisionEdge>, Error> {
    let owned: std::rc::Rc<std::cell::RefCell<Vec<SupervisionEdge>>> = Default::default();
    let sink = owned.clone();
    let owners = owners.clone();
    shuffle(
        worker,
        move |e: &SupervisionEdge| owners.key(e.src),
        move |e: SupervisionEdge| sink.borrow_mut().push(e),
        |send| {
            send(read);
            Ok::<(), Error>(())
        },
    )?;
    let mut owned = owned.take();
    owned.sort_unstable();
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_its_fraction_and_refuses_fractions_outside_0_1() {
        let sample = SupervisionSample::new(0.3, 11).unwrap();
        let kept = (0..10_000).filter(|&i| sample.keeps(i, i * 7 + 1)).count();
        assert!((2_800..3_200).contains(&kept), "{kept}");
        assert!((0..1_000).all(|i| SupervisionSample::ALL.keeps(i, -i)));
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(SupervisionSample::new(bad, 0).is_err(), "{bad}");
        }
    }
}
