//! The edge-partitioned kernel against the gather/scatter reference on one layer with a hub,
//! forward and forward + backward, on Flex with autodiff (as training runs it).
//!
//!   cargo bench -p gnn --bench aggregate [-- reps]
//!
//! Prints the median over `reps` (default 15) of each variant, and the ratios.

use std::time::Instant;

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::aggregate::EdgeTensors;
use gnn::batch::LayerEdges;
use gnn::kernel::Aggregation;
use gnn::rng::Stream;

/// A 2-hop-like layer: `rows_out` destinations with `degree` in-edges each, and a hub (row 0)
/// with `hub` in-edges, reading from `rows_in` rows.
fn layer(rows_in: usize, rows_out: usize, degree: usize, hub: usize) -> LayerEdges {
    let mut s = Stream::new(&[5]);
    let mut e = LayerEdges { rows_in, rows_out, ..LayerEdges::default() };
    let mut push = |d: usize, s: &mut Stream| {
        e.src.push((s.next_u64() % rows_in as u64) as i64);
        e.dst.push(d as i64);
    };
    for _ in 0..hub {
        push(0, &mut s);
    }
    for d in 1..rows_out {
        for _ in 0..degree {
            push(d, &mut s);
        }
    }
    let n = e.src.len();
    e.gcn_coef = (0..n).map(|_| s.unit()).collect();
    e.mean_coef = e.gcn_coef.clone();
    e.gcn_self = vec![0.5; rows_out];
    e.edge_keys = vec![(0, 0); n];
    e
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let reps: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(15);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let device = Device::flex().autodiff();
    let width = 64;
    // 10,240 roots' worth of a [10, 10] layer, plus a hub holding a third of the edges.
    let e = layer(110_000, 10_240, 10, 50_000);
    println!(
        "layer: {} rows in, {} rows out, {} edges ({} into the hub), width {width}, {cores} cores, {reps} reps",
        e.rows_in,
        e.rows_out,
        e.src.len(),
        50_000
    );
    let mut s = Stream::new(&[9]);
    let x: Vec<f32> = (0..e.rows_in * width).map(|_| s.unit()).collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [e.rows_in, width]), &device);

    let mut rows = Vec::new();
    for (name, aggregation, threads) in [
        ("reference (gather/scatter)", Aggregation::Reference, 1),
        ("kernel, 1 thread", Aggregation::Auto, 1),
        ("kernel, all cores", Aggregation::Auto, cores),
    ] {
        let t = EdgeTensors::new(&LayerEdges { threads, ..e.clone() }, &device, aggregation);
        let (mut forward, mut both) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let started = Instant::now();
            let out = t.sum(x.clone(), &t.gcn_coef);
            let _ = out.clone().sum().into_scalar::<f32>();
            forward.push(started.elapsed().as_secs_f64());

            let xg = x.clone().require_grad();
            let started = Instant::now();
            let grads = t.sum(xg.clone(), &t.gcn_coef).sum().backward();
            let _ = xg.grad(&grads).expect("gradient").sum().into_scalar::<f32>();
            both.push(started.elapsed().as_secs_f64());
        }
        let (f, b) = (median(forward), median(both));
        println!("{name:28} forward {:8.2} ms   forward+backward {:8.2} ms", f * 1e3, b * 1e3);
        rows.push((f, b));
    }
    let (rf, rb) = rows[0];
    for (name, (f, b)) in ["kernel, 1 thread", "kernel, all cores"].iter().zip(&rows[1..]) {
        println!("reference / {name:18}: forward {:.2}x, forward+backward {:.2}x", rf / f, rb / b);
    }
}
