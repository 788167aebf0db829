//! Round 0 on an edge table with a `split` column, against a plain reading of the table: the
//! graph a body gets holds the message-passing edges only (in-degrees and in-edges count `train`
//! and null edges, never `valid` or `test`, hubs included), and the supervision edges it asks for
//! are every edge with a split, each at the owner of its source, sorted, the same list on one,
//! two or three workers. Each sampled in-edge brings its source's slot when asked, equal to a
//! lookup of the source in the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cluster::owner_key;
use sampling::{ELSEWHERE, SampleSpec, SupervisionEdge, SupervisionSample};
use schemas::nodes::NodeRows;
use schemas::{ClusterConfig, LabelKind, Sampler, Split, StorageConfig, Targets, edges};
use serde::{Deserialize, Serialize};
use stage::{Body, Declared, Details, Graph, Progress, Reads, Summary, Worker, WorkerStats, Written};
use tables::commit::Stage;
use tables::parts::PartsOf;
use tables::table::TableWriter;
use tables::{Error, Io};

const NODES: i64 = 30;

/// The test's edges: (src, dst, split), parallel edges and a self-loop among them, and node 5
/// a hub (more in-edges than the hub threshold below) with in-edges of every split.
fn edge_list() -> Vec<(i64, i64, Option<Split>)> {
    let split = |i: i64| match i % 4 {
        0 => Some(Split::Valid),
        1 => Some(Split::Train),
        2 if i % 3 == 0 => Some(Split::Test),
        _ => None,
    };
    let mut list: Vec<(i64, i64, Option<Split>)> =
        (0..120).map(|i| ((i * 7 + 3) % NODES, (i * i + 1) % NODES, split(i))).collect();
    list.extend((0..12).map(|i| (i, 5, split(i + 1))));
    list.extend([(8, 8, Some(Split::Test)), (2, 9, Some(Split::Train)), (2, 9, Some(Split::Train))]);
    list
}

/// Writes the node and edge tables under `dir`.
fn write_graph(io: &Io, dir: &Path) {
    let nodes = TableWriter::start(
        io,
        &io.output(&dir.join("nodes").display().to_string()).unwrap(),
        Stage::Generate,
        &[],
        true,
    )
    .unwrap();
    let n = NODES as usize;
    let batch = NodeRows {
        ids: (0..NODES).collect(),
        features: (0..NODES).map(|v| v as f32).collect(),
        dim: 1,
        labels: &vec![None; n],
        label: LabelKind::Class,
        splits: &vec![None; n],
    }
    .to_batch();
    nodes.write(0, batch.schema(), &[batch]).unwrap();
    nodes.commit().unwrap();

    let table = TableWriter::start(
        io,
        &io.output(&dir.join("edges").display().to_string()).unwrap(),
        Stage::Generate,
        &[],
        true,
    )
    .unwrap();
    // Two parts, so that several workers read.
    let list = edge_list();
    for (part, chunk) in list.chunks(list.len() / 2 + 1).enumerate() {
        let plain = edges::to_batch(
            chunk.iter().map(|e| e.0).collect(),
            chunk.iter().map(|e| e.1).collect(),
            vec![1.0; chunk.len()],
        );
        let splits: Vec<Option<Split>> = chunk.iter().map(|e| e.2).collect();
        let batch = edges::with_splits(&plain, &splits);
        table.write(part, batch.schema(), &[batch]).unwrap();
    }
    table.commit().unwrap();
}

/// What one worker's body saw: its supervision edges as given, per node it owns (id,
/// in-degree, sampled in-edge sources sorted), the sampled in-edges (dst, src) whose source
/// slot is not the store's slot of a source it owns (or not marked [`ELSEWHERE`] for one it
/// does not), each node's slot, and the slot each in-edge of a source it does not own names.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Seen {
    supervision: Vec<SupervisionEdge>,
    nodes: Vec<(i64, u64, Vec<i64>)>,
    wrong_source_slots: Vec<(i64, i64)>,
    slots: Vec<(i64, u32)>,
    elsewhere: Vec<(i64, u32)>,
}

/// Every worker's [`Seen`], by worker index.
struct AllSeen(Vec<(usize, Seen)>);

impl Details for AllSeen {
    fn lines(&self, _: &Summary<Self>) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

struct Look {
    sample: Option<SupervisionSample>,
}

impl Reads for Look {
    fn sampling(&self) -> SampleSpec {
        SampleSpec {
            sampler: Sampler::All,
            seed: 1,
            limit: usize::MAX,
            hub_threshold: 3,
            relation_limits: Vec::new(),
            source_slots: true,
        }
    }

    fn supervision(&self) -> Option<SupervisionSample> {
        self.sample
    }
}

impl Body for Look {
    type Own = Seen;
    type Details = AllSeen;

    fn run(&mut self, _: &mut Worker, mut graph: Graph, _: &PartsOf) -> Result<Written<Seen>, Error> {
        let store = &mut graph.nodes;
        let mut source_slots = store.take_source_slots().into_iter();
        let (mut wrong_source_slots, mut elsewhere) = (Vec::new(), Vec::new());
        for s in 0..store.len() {
            for e in store.sampled(s) {
                let source = source_slots.next();
                match (store.slot(e.src), source) {
                    (Some(slot), Some(source)) if source == slot as u32 => {}
                    (None, Some(source)) if source & ELSEWHERE != 0 => elsewhere.push((e.src, source & !ELSEWHERE)),
                    _ => wrong_source_slots.push((store.ids[s], e.src)),
                }
            }
        }
        if source_slots.next().is_some() {
            wrong_source_slots.push((-1, -1));
        }
        let nodes = (0..store.len())
            .map(|s| {
                let mut sources: Vec<i64> = store.sampled(s).iter().map(|e| e.src).collect();
                sources.sort_unstable();
                (store.ids[s], store.in_degree[s], sources)
            })
            .collect();
        let slots = (0..store.len()).map(|s| (store.ids[s], s as u32)).collect();
        let own = Seen { supervision: graph.supervision, nodes, wrong_source_slots, slots, elsewhere };
        Ok(Written { own, ..Written::default() })
    }

    fn details(&self, all: &[WorkerStats<Seen>]) -> AllSeen {
        AllSeen(all.iter().map(|s| (s.worker, s.own.clone())).collect())
    }
}

/// Round 0 over `data` on `workers` threads into a fresh output `out`; every worker's view.
fn look(io: &Arc<Io>, data: &Path, out: PathBuf, workers: usize, sample: Option<SupervisionSample>) -> AllSeen {
    let cluster = ClusterConfig { workers, ..ClusterConfig::default() };
    let paths: Arc<[String; 3]> =
        Arc::new([data.join("nodes"), data.join("edges"), out].map(|p| p.display().to_string()));
    let (io, progress) = (io.clone(), Arc::new(Progress::new("look", "nodes", Vec::new())));
    let summary = stage::execute(&cluster, move |worker| {
        let declared = Declared {
            stage: Stage::Flatten,
            nodes: &paths[0],
            edges: &paths[1],
            output: &paths[2],
            overwrite: false,
            targets: &Targets::All,
            settings: serde_json::Value::Null,
            extras: Vec::new(),
            typed: None,
            link_relation: None,
            partition: None,
        };
        stage::run(worker, &io, &progress, workers, &declared, Look { sample })
    })
    .unwrap();
    summary.details
}

#[test]
fn held_out_edges_pass_no_messages_and_supervision_edges_sit_at_their_source_owner_on_any_cluster() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stage-supervision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let io = Io::new(&StorageConfig::default()).unwrap();
    write_graph(&io, &dir);

    // The table read plainly: message-passing in-edges per node, every edge with a split.
    let list = edge_list();
    let mut in_edges: BTreeMap<i64, Vec<i64>> = (0..NODES).map(|v| (v, Vec::new())).collect();
    for &(src, dst, split) in &list {
        if !matches!(split, Some(Split::Valid | Split::Test)) {
            in_edges.get_mut(&dst).unwrap().push(src);
        }
    }
    in_edges.values_mut().for_each(|v| v.sort_unstable());
    let mut supervised: Vec<SupervisionEdge> =
        list.iter().filter_map(|&(src, dst, split)| Some(SupervisionEdge { src, dst, split: split? })).collect();
    supervised.sort_unstable();
    assert!(in_edges[&5].len() > 3 && list.iter().any(|e| e.1 == 5 && e.2 == Some(Split::Valid)), "5 is a hub");

    let half = SupervisionSample::new(0.5, 3).unwrap();
    let mut halves = Vec::new();
    for workers in [1, 2, 3] {
        let seen = look(&io, &dir, dir.join(format!("all-{workers}")), workers, Some(SupervisionSample::ALL));
        every_edge_where_it_belongs(&seen, workers, &in_edges, &supervised);
        let seen = look(&io, &dir, dir.join(format!("half-{workers}")), workers, Some(half));
        let mut kept: Vec<SupervisionEdge> = seen.0.iter().flat_map(|(_, s)| s.supervision.clone()).collect();
        kept.sort_unstable();
        halves.push(kept);

        let none = look(&io, &dir, dir.join(format!("none-{workers}")), workers, None);
        assert!(none.0.iter().all(|(_, s)| s.supervision.is_empty()), "supervision edges nobody asked for");
    }
    assert!(halves.windows(2).all(|w| w[0] == w[1]), "the sample differs with the worker count");
    let kept = &halves[0];
    assert!(kept.iter().all(|e| supervised.binary_search(e).is_ok()));
    let share = kept.len() as f64 / supervised.len() as f64;
    assert!((0.3..0.7).contains(&share), "a sample of 0.5 kept {share} of {}", supervised.len());
    std::fs::remove_dir_all(&dir).unwrap(); // kept when an assertion above fails
}

/// What `workers` workers saw of every edge: the message-passing in-edges (and in-degrees) at
/// each node's owner, with each source's slot at its owner; and every edge with a split (`supervised`),
/// once, at its source's owner, sorted.
fn every_edge_where_it_belongs(
    seen: &AllSeen,
    workers: usize,
    in_edges: &BTreeMap<i64, Vec<i64>>,
    supervised: &[SupervisionEdge],
) {
    let mut nodes: Vec<(i64, u64, Vec<i64>)> = seen.0.iter().flat_map(|(_, s)| s.nodes.clone()).collect();
    nodes.sort_unstable();
    let expected: Vec<(i64, u64, Vec<i64>)> =
        in_edges.iter().map(|(&v, sources)| (v, sources.len() as u64, sources.clone())).collect();
    assert_eq!(nodes, expected, "{workers} workers: in-degrees and in-edges of message-passing edges only");
    let slots: BTreeMap<i64, u32> = seen.0.iter().flat_map(|(_, s)| s.slots.iter().copied()).collect();
    for (worker, s) in &seen.0 {
        assert_eq!(s.wrong_source_slots, [], "{workers} workers: worker {worker}'s source slots, hub 5's too");
        for &(src, slot) in &s.elsewhere {
            assert_eq!(slots[&src], slot, "{workers} workers: worker {worker}'s slot of {src} at its owner");
        }
    }
    let elsewhere = seen.0.iter().map(|(_, s)| s.elsewhere.len()).sum::<usize>();
    assert_eq!(elsewhere > 0, workers > 1, "{workers} workers: in-edges of sources owned elsewhere");

    for (worker, s) in &seen.0 {
        assert!(s.supervision.is_sorted(), "{workers} workers: worker {worker}'s list is not sorted");
        for e in &s.supervision {
            assert_eq!((owner_key(e.src) % workers as u64) as usize, *worker, "{e:?} is not at its source's owner");
        }
    }
    let mut all: Vec<SupervisionEdge> = seen.0.iter().flat_map(|(_, s)| s.supervision.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, supervised, "{workers} workers: every edge with a split, parallel ones each");
}
