//! The aggregation kernel over a whole graph with its rows in two orders: by a hash of the id
//! (as full-graph training numbers a worker's rows today) and grouped by community (as a
//! partition table's parts would group them). One GCN pass and its backward on one thread, on
//! Flex with autodiff (as full-graph training runs it); the same edges, coefficients and sums,
//! so only where the rows lie in memory differs.
//!
//! The graph is the generator's shape (`graphflat generate`): `nodes` nodes in 8 planted
//! communities scattered over the ids, 10 in-edges a node on average, each source from the
//! destination's community with probability 0.8.
//!
//!   cargo bench -p gnn --bench row_order [-- nodes [reps]]     (default 1000000 nodes, 5 reps)

use std::time::Instant;

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::aggregate::EdgeTensors;
use gnn::batch::LayerEdges;
use gnn::kernel::Aggregation;
use gnn::rng::Stream;

const COMMUNITIES: u64 = 8;
const DEGREE: u64 = 10;
const HOMOPHILY: f64 = 0.8;
const WIDTH: usize = 16;

/// A node's community, scattered over the ids (a multiplicative hash).
fn community(id: u64) -> u64 {
    id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61
}

/// The edges `(src, dst)` by node id, destinations in id order.
fn graph(nodes: u64) -> Vec<(u64, u64)> {
    let mut s = Stream::new(&[11]);
    let members: Vec<Vec<u64>> =
        (0..COMMUNITIES).map(|c| (0..nodes).filter(|&v| community(v) == c).collect()).collect();
    let mut edges = Vec::with_capacity((nodes * DEGREE) as usize);
    for dst in 0..nodes {
        let degree = s.next_u64() % (2 * DEGREE + 1);
        for _ in 0..degree {
            let src = if s.unit() < HOMOPHILY as f32 {
                let own = &members[community(dst) as usize];
                own[(s.next_u64() % own.len() as u64) as usize]
            } else {
                s.next_u64() % nodes
            };
            edges.push((src, dst));
        }
    }
    edges
}

/// The layer over `edges` with node `v` at row `row[v]`, edges sorted by destination row.
fn layer(edges: &[(u64, u64)], row: &[u64], nodes: usize) -> LayerEdges {
    let mut sorted: Vec<(i64, i64)> =
        edges.iter().map(|&(s, d)| (row[s as usize] as i64, row[d as usize] as i64)).collect();
    sorted.sort_by_key(|&(_, d)| d);
    let mut s = Stream::new(&[5]);
    let n = sorted.len();
    LayerEdges {
        rows_in: nodes,
        rows_out: nodes,
        src: sorted.iter().map(|e| e.0).collect(),
        dst: sorted.iter().map(|e| e.1).collect(),
        gcn_coef: (0..n).map(|_| s.unit()).collect(),
        mean_coef: vec![0.1; n],
        gcn_self: vec![0.5; nodes],
        edge_keys: vec![(0, 0); n],
        threads: 1,
        ..LayerEdges::default()
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (nodes, reps) = (args.first().copied().unwrap_or(1_000_000), args.get(1).copied().unwrap_or(5));
    let edges = graph(nodes as u64);
    let hashed = |v: u64| v.wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29);
    let numbered = |key: &dyn Fn(u64) -> (u64, u64)| {
        let mut ids: Vec<u64> = (0..nodes as u64).collect();
        ids.sort_by_key(|&v| key(v));
        let mut row = vec![0u64; nodes];
        for (r, &v) in ids.iter().enumerate() {
            row[v as usize] = r as u64;
        }
        row
    };
    let by_hash = numbered(&|v| (0, hashed(v)));
    let by_community = numbered(&|v| (community(v), hashed(v)));
    println!("{nodes} nodes, {} edges, width {WIDTH}, 1 thread, {reps} reps (medians)", edges.len());
    let device = Device::flex().autodiff();
    let mut s = Stream::new(&[9]);
    let x: Vec<f32> = (0..nodes * WIDTH).map(|_| s.unit()).collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [nodes, WIDTH]), &device);
    let mut rows = Vec::new();
    for (name, row) in [("rows by hash", &by_hash), ("rows by community", &by_community)] {
        let t = EdgeTensors::new(&layer(&edges, row, nodes), &device, Aggregation::Auto);
        let (mut forward, mut both) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let started = Instant::now();
            let _ = t.sum(x.clone(), &t.gcn_coef).sum().into_scalar::<f32>();
            forward.push(started.elapsed().as_secs_f64());
            let xg = x.clone().require_grad();
            let started = Instant::now();
            let grads = t.sum(xg.clone(), &t.gcn_coef).sum().backward();
            let _ = xg.grad(&grads).expect("gradient").sum().into_scalar::<f32>();
            both.push(started.elapsed().as_secs_f64());
        }
        let (f, b) = (median(forward), median(both));
        println!("{name:20} forward {:8.1} ms   forward+backward {:8.1} ms", f * 1e3, b * 1e3);
        rows.push((f, b));
    }
    let ((hf, hb), (cf, cb)) = (rows[0], rows[1]);
    println!("by hash / by community: forward {:.2}x, forward+backward {:.2}x", hf / cf, hb / cb);
}
