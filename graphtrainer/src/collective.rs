//! Small all-worker agreements outside the parameter server (a worker's maximum of a value).

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Input, Inspect, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle};
use timely::worker::Worker;

/// The largest `value` any worker holds, on every worker.
pub fn max(worker: &mut Worker, value: u64) -> u64 {
    let mut input = InputHandleVec::<u64, u64>::new();
    let probe = ProbeHandle::new();
    let seen = Rc::new(RefCell::new(0u64));
    let sink = seen.clone();
    worker.dataflow::<u64, _, _>(|scope| {
        scope
            .input_from(&mut input)
            .broadcast()
            .inspect(move |v| {
                let mut s = sink.borrow_mut();
                *s = (*s).max(*v);
            })
            .probe_with(&probe);
    });
    input.send(value);
    input.close();
    worker.step_or_park_while(None, || !probe.done());
    seen.take()
}
