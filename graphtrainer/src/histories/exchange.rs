//! Setting and reading history rows at their owners, over the request-and-answer dataflow
//! ([`crate::serve`]) that learned rows are pulled with: a worker sends each owner the ids it
//! sets (with their rows) or reads, only to the owners it needs, and waits for every answer.
//!
//! A set is answered once the owner holds the rows, so a worker whose sets are all answered
//! knows they are in place; a refresh ends with every worker agreeing (`cluster::agree`), after
//! which every read sees every worker's rows.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::dataflow::InputHandleVec;
use timely::worker::Worker;

use super::shard::HistoryShard;
use crate::serve::{Served, by_owner, served};

/// Ids one worker sets (with their rows, `values`) or reads at one owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    owner: u32,
    from: u32,
    set: bool,
    ids: Vec<i64>,
    values: Vec<f32>,
}

/// An owner's answer: a read's rows in the request's order (or the first id it has no row
/// for); nothing for a set.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    owner: u32,
    to: u32,
    rows: Result<Vec<f32>, i64>,
}

/// A worker's end of the dataflow.
pub struct Exchange {
    input: InputHandleVec<u64, Request>,
    answers: Rc<RefCell<Vec<Answer>>>,
    width: usize,
    round: u64,
}

impl Exchange {
    /// Builds the dataflow; `shard` is this worker's rows, which it serves.
    pub fn new(worker: &mut Worker, shard: Rc<RefCell<HistoryShard>>) -> Self {
        let width = shard.borrow().width;
        let serve = move |r: Request| {
            let mut shard = shard.borrow_mut();
            let rows = if r.set {
                shard.set(&r.ids, &r.values);
                Ok(Vec::new())
            } else {
                shard.get(&r.ids)
            };
            Answer { owner: r.owner, to: r.from, rows }
        };
        let Served { input, answers } =
            served(worker, "Histories", |r: &Request| u64::from(r.owner), |a: &Answer| u64::from(a.to), serve);
        Exchange { input, answers, width, round: 0 }
    }

    /// Sets the rows of `ids` (distinct), `width` values each in `values`, at their owners,
    /// and returns once every owner holds them.
    pub fn set(&mut self, worker: &mut Worker, ids: &[i64], values: &[f32]) {
        let width = self.width;
        let rows = |at: &[usize]| at.iter().flat_map(|&i| &values[i * width..(i + 1) * width]).copied().collect();
        self.ask(worker, ids, true, rows);
    }

    /// The rows of `ids` (an id listed twice is read twice), `width` values each in `ids`
    /// order, from their owners; or an id no owner has a row for.
    pub fn get(&mut self, worker: &mut Worker, ids: &[i64]) -> Result<Vec<f32>, i64> {
        let (asked, mut answers) = self.ask(worker, ids, false, |_| Vec::new());
        let width = self.width;
        // One owner had them all (one worker, or by chance): its rows are in `ids` order.
        if answers.len() == 1 && asked[answers[0].owner as usize].len() == ids.len() {
            return answers.pop().expect("one answer").rows;
        }
        let mut rows = vec![0.0f32; ids.len() * width];
        for answer in answers {
            let values = answer.rows?;
            for (&at, row) in asked[answer.owner as usize].iter().zip(values.chunks_exact(width.max(1))) {
                rows[at * width..(at + 1) * width].copy_from_slice(row);
            }
        }
        Ok(rows)
    }

    /// Sends each owner its ids of `ids` (with `values_of` their positions' rows) and waits for
    /// every answer: the positions asked of each owner, and the answers.
    fn ask(
        &mut self,
        worker: &mut Worker,
        ids: &[i64],
        set: bool,
        values_of: impl Fn(&[usize]) -> Vec<f32>,
    ) -> (Vec<Vec<usize>>, Vec<Answer>) {
        let asked = by_owner(ids, worker.peers());
        let mut expected = 0;
        for (o, positions) in asked.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            let ids = positions.iter().map(|&at| ids[at]).collect();
            let values = values_of(positions);
            self.input.send(Request { owner: o as u32, from: worker.index() as u32, set, ids, values });
            expected += 1;
        }
        self.round += 1;
        self.input.advance_to(self.round);
        cluster::wait_while(worker, || self.answers.borrow().len() < expected);
        let answers = std::mem::take(&mut *self.answers.borrow_mut());
        (asked, answers)
    }
}
