//! Pulling learned rows from their owners: a request-and-reply dataflow on the training
//! cluster. A worker sends each owner the ids it needs (only the owners it needs something
//! from), the owner answers with the rows (creating a new one from its seed), and the worker
//! steps timely until every answer is in. Answers do not wait for a frontier: workers pull
//! when they need to, as many times as they need (evaluation passes differ in length between
//! workers), and a worker waiting for its answers serves the others' requests meanwhile.
//!
//! Consistency with the parameter server: a step's pushes are applied by the owner before it
//! sends that step's update (see `crate::ps`), and a worker pulls for its next step only after
//! it has every update of the step before; so in `sync` mode every pull sees every earlier
//! step's gradients, and in `async` mode at most `staleness` steps are missing, as for the
//! weights.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::dataflow::InputHandleVec;
use timely::worker::Worker;

use super::shard::RowShard;
use crate::serve::{Served, by_owner, served};

/// The ids one worker asks one owner for, with their original strings in a graph keyed by
/// strings (the owner keeps a new row's, to save the row under it).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    owner: u32,
    from: u32,
    ids: Vec<i64>,
    keys: Vec<String>,
}

/// An owner's answer: the rows of a request's ids, in its order.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    owner: u32,
    to: u32,
    values: Vec<f32>,
}

/// A worker's end of the pull dataflow.
pub struct Puller {
    input: InputHandleVec<u64, Request>,
    answers: Rc<RefCell<Vec<Answer>>>,
    dim: usize,
    round: u64,
}

/// The owner of node `id` among `peers` workers: the owner every stage uses.
pub fn owner(id: i64, peers: usize) -> usize {
    (cluster::hash::owner_key(id) % peers as u64) as usize
}

impl Puller {
    /// Builds the dataflow; `shard` is this worker's rows, which it serves.
    pub fn new(worker: &mut Worker, shard: Rc<RefCell<RowShard>>) -> Self {
        let dim = shard.borrow().dim;
        let serve =
            move |r: Request| Answer { owner: r.owner, to: r.from, values: shard.borrow_mut().rows(&r.ids, &r.keys) };
        let Served { input, answers } =
            served(worker, "Rows", |r: &Request| u64::from(r.owner), |a: &Answer| u64::from(a.to), serve);
        Puller { input, answers, dim, round: 0 }
    }

    /// The rows of `ids` (each once, in any order), `dim` values each in `ids` order, from
    /// their owners; `keys` are the ids' original strings (empty for integer ids).
    pub fn pull(&mut self, worker: &mut Worker, ids: &[i64], keys: &[String]) -> Vec<f32> {
        let asked = by_owner(ids, worker.peers());
        let mut expected = 0;
        for (o, positions) in asked.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            let ids = positions.iter().map(|&at| ids[at]).collect();
            let keys =
                if keys.is_empty() { Vec::new() } else { positions.iter().map(|&at| keys[at].clone()).collect() };
            self.input.send(Request { owner: o as u32, from: worker.index() as u32, ids, keys });
            expected += 1;
        }
        self.round += 1;
        self.input.advance_to(self.round);
        cluster::wait_while(worker, || self.answers.borrow().len() < expected);
        let mut rows = vec![0.0f32; ids.len() * self.dim];
        for answer in self.answers.borrow_mut().drain(..) {
            for (&at, row) in asked[answer.owner as usize].iter().zip(answer.values.chunks(self.dim)) {
                rows[at * self.dim..(at + 1) * self.dim].copy_from_slice(row);
            }
        }
        rows
    }
}
