//! The request-and-answer dataflow that learned rows ([`crate::learned::pull`]) and control
//! variates' histories ([`crate::histories::exchange`]) are served by: a worker sends requests
//! to their owners, each owner answers each request as it arrives (not waiting for a frontier:
//! workers ask as often as their batches need, and evaluation passes differ in length between
//! workers), and the answers come back to the worker that asked, which steps timely until it
//! has them all, serving the others' requests meanwhile.

use std::cell::RefCell;
use std::rc::Rc;

use timely::ExchangeData;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::InputHandleVec;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Exchange as _, Input};
use timely::worker::Worker;

/// A worker's end of a served dataflow: where it sends requests, and where answers arrive.
pub struct Served<Req: ExchangeData + Clone, Ans> {
    pub input: InputHandleVec<u64, Req>,
    pub answers: Rc<RefCell<Vec<Ans>>>,
}

/// Builds the dataflow named `name`: a request goes to worker `owner(request)`, whose
/// `answer` makes its answer, which goes to worker `to(answer)`.
pub fn served<Req: ExchangeData + Clone, Ans: ExchangeData + Clone>(
    worker: &mut Worker,
    name: &str,
    owner: fn(&Req) -> u64,
    to: fn(&Ans) -> u64,
    mut answer: impl FnMut(Req) -> Ans + 'static,
) -> Served<Req, Ans> {
    let mut input = InputHandleVec::<u64, Req>::new();
    let answers = Rc::new(RefCell::new(Vec::new()));
    let sink = answers.clone();
    worker.dataflow::<u64, _, _>(|scope| {
        scope
            .input_from(&mut input)
            .unary::<CapacityContainerBuilder<Vec<Ans>>, _, _, _>(Exchange::new(owner), name, move |_, _| {
                move |input, output| {
                    input.for_each(|cap, requests| {
                        let mut session = output.session(&cap);
                        requests.drain(..).for_each(|r| session.give(answer(r)));
                    });
                }
            })
            .exchange(to)
            // Taken, not cloned: an answer holds a batch's rows.
            .sink(Pipeline, &format!("{name}Answers"), move |(input, _)| {
                input.for_each(|_, answers| sink.borrow_mut().append(answers));
            });
    });
    Served { input, answers }
}

/// The positions in `ids` of each owner's nodes among `peers` workers (`crate::learned::owner`):
/// what a worker asks each owner for.
pub fn by_owner(ids: &[i64], peers: usize) -> Vec<Vec<usize>> {
    // About ids / peers each (hashed owners): one growth at most, where pushing from empty
    // grew each list a dozen times in a step's hot path.
    let mut asked: Vec<Vec<usize>> = (0..peers).map(|_| Vec::with_capacity(ids.len().div_ceil(peers))).collect();
    for (at, &id) in ids.iter().enumerate() {
        asked[crate::learned::owner(id, peers)].push(at);
    }
    asked
}
