//! Collective steps between phases: every worker calls them in the same order, each builds the
//! same small dataflow, and each gets back what was sent to it. What crosses the wire is the
//! items themselves, routed by `route(item) % peers` (timely's `Exchange`): in one hop
//! ([`exchange`], [`shuffle`]), or in two, through a worker that transforms each item on its
//! way ([`relay`]).

use std::cell::RefCell;
use std::rc::Rc;

use timely::ExchangeData;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange as ExchangePact;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Exchange, Input, Inspect, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, StreamVec};
use timely::worker::Worker;

use crate::wait::wait_while;

/// Sends each item to worker `route(item) % peers`; returns what this worker received once
/// every worker has sent everything.
pub fn exchange<D, R>(worker: &mut Worker, items: Vec<D>, route: R) -> Vec<D>
where
    D: ExchangeData + Clone,
    R: Fn(&D) -> u64 + 'static,
{
    let mut input = InputHandleVec::<u64, D>::new();
    let probe = ProbeHandle::new();
    let received = Rc::new(RefCell::new(Vec::new()));
    let sink = received.clone();
    worker.dataflow::<u64, _, _>(|scope| {
        scope
            .input_from(&mut input)
            .exchange(move |d| route(d))
            .inspect(move |d| sink.borrow_mut().push(d.clone()))
            .probe_with(&probe);
    });
    for item in items {
        input.send(item);
    }
    input.close();
    wait_while(worker, || !probe.done());
    received.take()
}

/// Every worker's items, on every worker, in a deterministic order (sorted).
pub fn all_gather<D: ExchangeData + Clone + Ord>(worker: &mut Worker, items: Vec<D>) -> Vec<D> {
    let peers = worker.peers() as u64;
    let tagged: Vec<(u64, D)> = (0..peers).flat_map(|p| items.iter().cloned().map(move |d| (p, d))).collect();
    let mut all: Vec<D> = exchange(worker, tagged, |(p, _)| *p).into_iter().map(|(_, d)| d).collect();
    all.sort();
    all
}

/// The value one worker offers (`Some` on that worker, `None` elsewhere), on every worker.
pub fn broadcast<D: ExchangeData + Clone + Ord>(worker: &mut Worker, value: Option<D>) -> Option<D> {
    all_gather(worker, value.into_iter().collect()).into_iter().next()
}

/// Sums a counter over all workers.
pub fn sum(worker: &mut Worker, value: u64) -> u64 {
    let index = worker.index() as u64;
    all_gather(worker, vec![(index, value)]).iter().map(|(_, v)| v).sum()
}

/// Makes every worker agree on failure: if any worker's `local` is an error, every worker
/// returns the same error (the smallest, so the first bad row of the first bad file wins).
/// `R` is the error as it crosses between workers.
pub fn agree<T, E, R>(worker: &mut Worker, local: Result<T, E>) -> Result<T, E>
where
    R: ExchangeData + Clone + Ord + for<'a> From<&'a E>,
    E: From<R>,
{
    let reports: Vec<R> = match &local {
        Ok(_) => Vec::new(),
        Err(e) => vec![R::from(e)],
    };
    match all_gather(worker, reports).into_iter().next() {
        None => local,
        Some(first) => Err(first.into()),
    }
}

/// Streams items produced on every worker to the workers `route` names, where `consume` takes
/// each. `produce` gets a `send` function; each call ships a batch and lets the dataflow run,
/// so no worker holds more than a batch in flight. Returns `produce`'s result once every
/// worker is done.
pub fn shuffle<D, R, C, P, E>(worker: &mut Worker, route: R, consume: C, produce: P) -> Result<(), E>
where
    D: ExchangeData + Clone,
    R: Fn(&D) -> u64 + 'static,
    C: FnMut(D) + 'static,
    P: FnOnce(&mut dyn FnMut(Vec<D>)) -> Result<(), E>,
{
    let mut input = InputHandleVec::<u64, D>::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| deliver(scope.input_from(&mut input), route, consume, &probe));
    feed(worker, input, &probe, produce)
}

/// Streams items produced on every worker through two hops: each goes to worker
/// `first(item) % peers`, where `hop` turns it into at most one item for worker
/// `second(item) % peers`, where `consume` takes it. As in [`shuffle`], each `send` ships a
/// batch and lets the dataflow run, so items flow through the middle workers as they come
/// instead of piling up there. Returns `produce`'s result once every worker is done.
pub fn relay<D, E, R1, H, R2, C, P, X>(
    worker: &mut Worker,
    first: R1,
    mut hop: H,
    second: R2,
    consume: C,
    produce: P,
) -> Result<(), X>
where
    D: ExchangeData + Clone,
    E: ExchangeData + Clone,
    R1: Fn(&D) -> u64 + 'static,
    H: FnMut(D) -> Option<E> + 'static,
    R2: Fn(&E) -> u64 + 'static,
    C: FnMut(E) + 'static,
    P: FnOnce(&mut dyn FnMut(Vec<D>)) -> Result<(), X>,
{
    let mut input = InputHandleVec::<u64, D>::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        let hopped = scope.input_from(&mut input).unary::<CapacityContainerBuilder<Vec<E>>, _, _, _>(
            ExchangePact::new(move |d: &D| first(d)),
            "Hop",
            |_, _| {
                move |input, output| {
                    input.for_each(|time, data| {
                        let mut session = output.session(&time);
                        data.drain(..).filter_map(&mut hop).for_each(|e| session.give(e));
                    });
                }
            },
        );
        deliver(hopped, second, consume, &probe);
    });
    feed(worker, input, &probe, produce)
}

/// The last hop of [`shuffle`] and [`relay`]: each item of `stream` goes to worker
/// `route(item) % peers`, whose `consume` takes it; `probe` sees when all have been taken.
fn deliver<'s, D, R, C>(stream: StreamVec<'s, u64, D>, route: R, mut consume: C, probe: &ProbeHandle<u64>)
where
    D: ExchangeData + Clone,
    R: Fn(&D) -> u64 + 'static,
    C: FnMut(D) + 'static,
{
    stream
        .unary::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
            ExchangePact::new(move |d: &D| route(d)),
            "Consume",
            |_, _| {
                move |input, _output| {
                    input.for_each(|_, data| data.drain(..).for_each(&mut consume));
                }
            },
        )
        .probe_with(probe);
}

/// Runs `produce` with a `send` that ships each batch into `input` and lets the dataflow run
/// (so no worker holds more than a batch in flight), then closes the input and waits until
/// every worker's items have passed `probe`.
fn feed<D, P, E>(
    worker: &mut Worker,
    mut input: InputHandleVec<u64, D>,
    probe: &ProbeHandle<u64>,
    produce: P,
) -> Result<(), E>
where
    D: ExchangeData + Clone,
    P: FnOnce(&mut dyn FnMut(Vec<D>)) -> Result<(), E>,
{
    let result = {
        let mut send = |batch: Vec<D>| {
            for item in batch {
                input.send(item);
            }
            input.flush();
            worker.step();
            crate::wait::check_abort();
        };
        produce(&mut send)
    };
    input.close();
    wait_while(worker, || !probe.done());
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::ClusterConfig;

    /// Every item passes the worker `first` names, which sees it and may drop it, and arrives at
    /// the worker `second` names, on any number of workers.
    #[test]
    fn relay_passes_each_item_through_both_owners() {
        for workers in [1, 3] {
            let config = ClusterConfig { workers, ..ClusterConfig::default() };
            let got = crate::execute(&config, |worker| {
                let (me, peers) = (worker.index() as u64, worker.peers() as u64);
                let received = Rc::new(RefCell::new(Vec::new()));
                let sink = received.clone();
                relay(
                    worker,
                    |&v: &u64| v,
                    move |v: u64| (!v.is_multiple_of(5)).then_some((v, v % peers, me)),
                    |&(v, _, _): &(u64, u64, u64)| v / 2,
                    move |(v, middle, at)| sink.borrow_mut().push((v, middle == at, v / 2 % peers == me)),
                    |send| {
                        send((me * 100..me * 100 + 40).collect());
                        send((me * 100 + 40..me * 100 + 50).collect());
                        Ok::<(), String>(())
                    },
                )?;
                let received = received.take();
                assert!(received.iter().all(|&(_, first, second)| first && second), "{received:?}");
                Ok::<_, String>(all_gather(worker, received.into_iter().map(|r| r.0).collect()))
            })
            .unwrap();
            let expected: Vec<u64> =
                (0..workers as u64).flat_map(|w| w * 100..w * 100 + 50).filter(|v| !v.is_multiple_of(5)).collect();
            assert!(got.iter().all(|g| *g == expected), "{workers} workers");
        }
    }
}
