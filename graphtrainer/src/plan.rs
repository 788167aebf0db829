//! Which units (row groups) each worker trains and evaluates on, and how many steps an epoch
//! has.
//!
//! Workers count the units first (root, split and label columns only; worker `i` of `n` counts
//! units `i`, `i + n`, ...), and every worker gathers all counts, so every worker computes the
//! same plan from the same numbers. Units go to workers by their training records, largest
//! first, each to the least loaded worker (ties to the lower index); units without training
//! records follow, by their evaluation records, each to the worker with the fewest of those.
//! The shares of each pass differ by at most one unit's records, and every row group is
//! decoded by one worker only. GraphFlat writes each split's records in row groups of their
//! own, so a pass decodes only the units that hold its records ([`Plan::units_of`]).
//!
//! The plan depends on the record set and the number of workers, never on how the workers are
//! spread over processes: 2 processes of 1 worker train exactly as 1 process of 2.

use timely::worker::Worker;

use crate::error::Error;
use crate::reader::{Counts, Pass, RecordSet, Unit};

/// Every unit, its counts, and each worker's share.
#[derive(Debug, Clone)]
pub struct Plan {
    pub units: Vec<Unit>,
    pub counts: Vec<Counts>,
    /// Per worker, the numbers of its units, ascending.
    pub shares: Vec<Vec<usize>>,
}

impl Plan {
    /// Counts the set's units on all workers and plans them; every worker gets the same plan,
    /// or the same first error. The processes must have opened one version of the set (their
    /// units are numbered within it: see [`RecordSet::one_version`]).
    pub fn gather(worker: &mut Worker, set: &RecordSet, classes: Option<usize>) -> Result<Plan, Error> {
        let units = set.units();
        let (index, peers) = (worker.index(), worker.peers());
        let local: Result<Vec<(usize, Counts)>, Error> =
            (index..units.len()).step_by(peers).map(|u| Ok((u, set.count(units[u], classes)?))).collect();
        let local = cluster::agree::<_, Error, tables::error::Report>(worker, local)?;
        let mut counts = vec![Counts::default(); units.len()];
        for (u, c) in cluster::all_gather(worker, local) {
            counts[u] = c;
        }
        Ok(Plan::new(units, counts, peers))
    }

    /// Plans `units` with these counts over `peers` workers.
    pub fn new(units: Vec<Unit>, counts: Vec<Counts>, peers: usize) -> Plan {
        // Largest first: by training records, then by evaluation records, then unit number.
        let mut order: Vec<usize> = (0..units.len()).collect();
        order.sort_by_key(|&u| (std::cmp::Reverse((counts[u].train, counts[u].of(Pass::Evaluate))), u));
        let mut load = vec![(0u64, 0u64); peers];
        let mut shares = vec![Vec::new(); peers];
        for u in order {
            // A unit without training records (GraphFlat writes each split in row groups of
            // its own) balances the evaluation pass instead.
            let w = if counts[u].train > 0 {
                (0..peers).min_by_key(|&w| (load[w], w))
            } else {
                (0..peers).min_by_key(|&w| (load[w].1, load[w].0, w))
            };
            let w = w.unwrap_or(0);
            load[w].0 += counts[u].train;
            load[w].1 += counts[u].of(Pass::Evaluate);
            shares[w].push(u);
        }
        shares.iter_mut().for_each(|s| s.sort_unstable());
        Plan { units, counts, shares }
    }

    /// The counts summed over every unit.
    pub fn totals(&self) -> Counts {
        self.counts.iter().fold(Counts::default(), |mut t, c| {
            t.add(c);
            t
        })
    }

    /// The counts summed over worker `w`'s units.
    pub fn share_totals(&self, w: usize) -> Counts {
        self.shares[w].iter().fold(Counts::default(), |mut t, &u| {
            t.add(&self.counts[u]);
            t
        })
    }

    /// Worker `w`'s units that hold records `pass` takes, ascending: a unit without any (a
    /// row group of another split) is never decoded for that pass.
    pub fn units_of(&self, w: usize, pass: Pass) -> Vec<Unit> {
        self.shares[w].iter().filter(|&&u| self.counts[u].of(pass) > 0).map(|&u| self.units[u]).collect()
    }

    /// Steps per epoch: every worker takes part in every step, so the longest share decides.
    pub fn steps(&self, batch_size: usize) -> usize {
        (0..self.shares.len())
            .map(|w| self.share_totals(w).train.div_ceil(batch_size as u64) as usize)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(train: &[u64]) -> Vec<Counts> {
        train.iter().map(|&t| Counts { train: t, valid: t % 3, ..Counts::default() }).collect()
    }

    fn units(n: usize) -> Vec<Unit> {
        (0..n).map(|i| Unit { file: i / 4, row_group: i % 4 }).collect()
    }

    #[test]
    fn every_unit_goes_to_exactly_one_worker_and_shares_are_balanced() {
        let train = [90, 10, 40, 40, 0, 7, 55, 31, 12, 3, 0, 64];
        for peers in 1..6 {
            let plan = Plan::new(units(train.len()), counts(&train), peers);
            let mut seen: Vec<usize> = plan.shares.concat();
            seen.sort_unstable();
            assert_eq!(seen, (0..train.len()).collect::<Vec<_>>(), "{peers} workers");
            let loads: Vec<u64> = (0..peers).map(|w| plan.share_totals(w).train).collect();
            let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            // Greedy largest-first: the spread is at most the largest unit.
            assert!(max - min <= 90, "{peers} workers: {loads:?}");
            assert_eq!(plan.totals().train, train.iter().sum::<u64>());
            let steps = loads.iter().map(|l| l.div_ceil(16) as usize).max().unwrap();
            assert_eq!(plan.steps(16), steps);
        }
    }

    #[test]
    fn units_of_one_split_balance_each_pass_and_are_read_by_that_pass_only() {
        // GraphFlat's layout: every unit holds one split (train, or valid and test).
        let (train, evaluate) = ([30, 28, 25, 22, 20, 9, 4], [40, 35, 12, 11, 10, 3]);
        let mut all: Vec<Counts> = train.iter().map(|&t| Counts { train: t, ..Counts::default() }).collect();
        all.extend(evaluate.iter().enumerate().map(|(i, &e)| Counts {
            valid: e - i as u64,
            test: i as u64,
            ..Counts::default()
        }));
        let n = all.len();
        for peers in 1..5 {
            let plan = Plan::new(units(n), all.clone(), peers);
            for (pass, largest) in [(Pass::Train, 30), (Pass::Evaluate, 40)] {
                let loads: Vec<u64> = (0..peers).map(|w| plan.share_totals(w).of(pass)).collect();
                let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
                assert!(max - min <= largest, "{peers} workers, {pass:?}: {loads:?}");
                // Each worker reads, for a pass, exactly its units that hold that pass's records.
                let read: Vec<Unit> = (0..peers).flat_map(|w| plan.units_of(w, pass)).collect();
                let holding: Vec<Unit> = (0..n).filter(|&u| all[u].of(pass) > 0).map(|u| plan.units[u]).collect();
                assert_eq!(read.len(), holding.len(), "{peers} workers, {pass:?}");
                assert!(holding.iter().all(|u| read.contains(u)), "{peers} workers, {pass:?}");
            }
        }
    }

    #[test]
    fn the_plan_depends_on_the_counts_alone() {
        let train = [5, 5, 5, 5, 9];
        let a = Plan::new(units(5), counts(&train), 3);
        let b = Plan::new(units(5), counts(&train), 3);
        assert_eq!(a.shares, b.shares);
        // Equal loads break ties by worker index: the 9 goes to worker 0.
        assert_eq!(a.shares[0], vec![4]);
    }
}
