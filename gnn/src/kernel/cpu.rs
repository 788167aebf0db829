//! The edge-partitioned aggregation on plain slices, multi-threaded.
//!
//! `out[w] = sum over edges (w <- r) of coef[e, h] * x[r]` (per head `h`), where the plan groups
//! edges by the row `w` they write. Blocks of equal edge counts are handed to threads in
//! contiguous runs. A thread writes the rows whose edges all lie in one of its blocks; a row that
//! straddles a block boundary (a hub) is summed per block into a private buffer and the buffers
//! are added in block order after the join. No two threads write the same row, a hub is split
//! across threads, and the result does not depend on the thread count.

use std::ops::Range;
use std::sync::Mutex;

use super::plan::Csr;

/// Below this many multiply-adds, spawning threads costs more than it saves.
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// Row layout: `cols = heads * head_width` values per row, coefficients `[edges, heads]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub heads: usize,
    pub cols: usize,
}

impl Layout {
    fn head_width(&self) -> usize {
        self.cols / self.heads
    }
}

/// Runs each task on a thread of its own and returns their results in order. A task whose
/// thread cannot start (the process at its memory or thread limit) runs on the caller's thread
/// instead: the result is the same, and the kernel never panics for want of a thread.
fn run_all<T: Send, F: FnOnce() -> T + Send>(tasks: Vec<F>) -> Vec<T> {
    let slots: Vec<Mutex<Option<F>>> = tasks.into_iter().map(|f| Mutex::new(Some(f))).collect();
    let take = |slot: &Mutex<Option<F>>| slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    std::thread::scope(|scope| {
        let threads: Vec<_> = slots
            .iter()
            .map(|slot| std::thread::Builder::new().spawn_scoped(scope, move || take(slot).map(|f| f())).ok())
            .collect();
        let run = |(slot, thread): (&Mutex<Option<F>>, Option<std::thread::ScopedJoinHandle<'_, Option<T>>>)| {
            let done = match thread {
                Some(thread) => thread.join().expect("aggregation thread panicked"),
                None => take(slot).map(|f| f()),
            };
            done.expect("each task runs once")
        };
        slots.iter().zip(threads).map(run).collect()
    })
}

/// A row's partial sum over one block, for a row that straddles blocks.
struct Partial {
    row: usize,
    sum: Vec<f32>,
}

/// `out[w] += coef[e] * x[r]` over the plan's edges; `out` has `csr.rows()` rows.
pub fn aggregate(csr: &Csr, x: &[f32], coef: &[f32], layout: Layout, threads: usize) -> Vec<f32> {
    let cols = layout.cols;
    let mut out = vec![0f32; csr.rows() * cols];
    let groups = thread_groups(csr, cols, threads);
    let partials: Vec<Vec<Partial>> = if groups.len() <= 1 {
        groups.into_iter().map(|g| run_blocks(csr, g, 0, &mut out, x, coef, layout)).collect()
    } else {
        // Thread t owns rows first_row(t)..first_row(t + 1); a straddling row at a boundary is
        // in one thread's range but only ever written through partials.
        let starts: Vec<usize> = groups
            .iter()
            .enumerate()
            .map(|(t, g)| if t == 0 { 0 } else { csr.row_of(csr.blocks[g.start].start) })
            .collect();
        let mut rest = out.as_mut_slice();
        let mut tasks = Vec::with_capacity(groups.len());
        for (t, g) in groups.into_iter().enumerate() {
            let end = starts.get(t + 1).copied().unwrap_or(csr.rows());
            let (mine, tail) = rest.split_at_mut((end - starts[t]) * cols);
            rest = tail;
            let first = starts[t];
            tasks.push(move || run_blocks(csr, g, first, mine, x, coef, layout));
        }
        run_all(tasks)
    };
    for p in partials.into_iter().flatten() {
        for (o, v) in out[p.row * cols..(p.row + 1) * cols].iter_mut().zip(&p.sum) {
            *o += v;
        }
    }
    out
}

/// `grad[e, h] = <g[w], x[r]>` restricted to head `h`, for each edge `(w <- r)`: the gradient of
/// [`aggregate`] with respect to its coefficients. In edge order, `[edges, heads]`.
pub fn coef_grad(csr: &Csr, g: &[f32], x: &[f32], layout: Layout, threads: usize) -> Vec<f32> {
    let (heads, width, cols) = (layout.heads, layout.head_width(), layout.cols);
    // Computed in position order (each block owns a contiguous slice), then put in edge order.
    let mut by_position = vec![0f32; csr.edges() * heads];
    let fill = |block: Range<usize>, dots: &mut [f32]| {
        let mut row = csr.row_of(block.start);
        for (i, p) in block.enumerate() {
            while csr.ptr[row + 1] <= p {
                row += 1;
            }
            let (gw, xr) = (&g[row * cols..(row + 1) * cols], &x[csr.other[p] as usize * cols..][..cols]);
            for h in 0..heads {
                let span = h * width..(h + 1) * width;
                dots[i * heads + h] = gw[span.clone()].iter().zip(&xr[span]).map(|(a, b)| a * b).sum();
            }
        }
    };
    let groups = thread_groups(csr, cols, threads);
    if groups.len() <= 1 {
        for block in &csr.blocks {
            fill(block.clone(), &mut by_position[block.start * heads..block.end * heads]);
        }
    } else {
        let mut rest = by_position.as_mut_slice();
        let mut tasks = Vec::with_capacity(groups.len());
        for g in groups {
            let span = csr.blocks[g.start].start..csr.blocks[g.end - 1].end;
            let (mine, tail) = rest.split_at_mut(span.len() * heads);
            rest = tail;
            let fill = &fill;
            tasks.push(move || {
                for block in &csr.blocks[g] {
                    let at = (block.start - span.start) * heads;
                    fill(block.clone(), &mut mine[at..at + block.len() * heads]);
                }
            });
        }
        run_all(tasks);
    }
    let mut grad = vec![0f32; csr.edges() * heads];
    for (p, &e) in csr.edge.iter().enumerate() {
        grad[e as usize * heads..][..heads].copy_from_slice(&by_position[p * heads..][..heads]);
    }
    grad
}

/// Contiguous runs of blocks, one per thread (a single run when the work is small).
fn thread_groups(csr: &Csr, cols: usize, threads: usize) -> Vec<Range<usize>> {
    let blocks = csr.blocks.len();
    let threads = if csr.edges() * cols < PARALLEL_MIN_WORK { 1 } else { threads.clamp(1, blocks.max(1)) };
    (0..threads).map(|t| t * blocks / threads..(t + 1) * blocks / threads).filter(|g| !g.is_empty()).collect()
}

/// Positions ahead of the one being summed whose row and coefficient are asked into the cache:
/// the rows read are scattered, one cache miss each, and the loop itself keeps few loads in
/// flight.
const AHEAD: usize = 16;

/// Asks the cache line holding `data[at]` in, when `at` is in `data` (a hint: it changes no
/// value). `cluster::prefetch` is the same hint for the stages' loops; `gnn` does not depend on
/// `cluster`.
#[inline(always)]
fn prefetch(data: &[f32], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < data.len() {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `at` is inside `data`; a prefetch reads nothing the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().add(at).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

/// Runs `blocks`, writing whole rows into `out` (which starts at row `first`) and returning the
/// partial sums of rows that straddle a block boundary.
fn run_blocks(
    csr: &Csr,
    blocks: Range<usize>,
    first: usize,
    out: &mut [f32],
    x: &[f32],
    coef: &[f32],
    layout: Layout,
) -> Vec<Partial> {
    let (heads, width, cols) = (layout.heads, layout.head_width(), layout.cols);
    let mut partials = Vec::new();
    for block in &csr.blocks[blocks] {
        let (a, b) = (block.start, block.end);
        for row in csr.row_of(a)..=csr.row_of(b - 1) {
            let (start, end) = (csr.ptr[row], csr.ptr[row + 1]);
            let whole = start >= a && end <= b;
            let mut straddling = Vec::new();
            let sum: &mut [f32] = if whole {
                &mut out[(row - first) * cols..(row - first + 1) * cols]
            } else {
                straddling.resize(cols, 0.0);
                &mut straddling
            };
            for p in start.max(a)..end.min(b) {
                if let Some(&ahead) = csr.other.get(p + AHEAD) {
                    prefetch(x, ahead as usize * cols);
                    prefetch(coef, csr.edge[p + AHEAD] as usize * heads);
                }
                let (e, r) = (csr.edge[p] as usize, csr.other[p] as usize);
                let xr = &x[r * cols..(r + 1) * cols];
                for h in 0..heads {
                    let c = coef[e * heads + h];
                    let span = h * width..(h + 1) * width;
                    for (o, v) in sum[span.clone()].iter_mut().zip(&xr[span]) {
                        *o += c * v;
                    }
                }
            }
            if !whole {
                partials.push(Partial { row, sum: straddling });
            }
        }
    }
    partials
}

#[cfg(test)]
mod tests {
    use super::super::plan::EdgePlan;
    use super::*;

    #[test]
    fn tasks_return_in_order_on_their_threads() {
        let tasks: Vec<_> = (0..12u64).map(|i| move || (i, i * i)).collect();
        assert_eq!(run_all(tasks), (0..12u64).map(|i| (i, i * i)).collect::<Vec<_>>());
    }

    /// A plain loop over the edges in edge order.
    fn naive(src: &[u32], dst: &[u32], rows_out: usize, x: &[f32], coef: &[f32], layout: Layout) -> Vec<f32> {
        let (heads, cols) = (layout.heads, layout.cols);
        let width = cols / heads;
        let mut out = vec![0f32; rows_out * cols];
        for e in 0..src.len() {
            for j in 0..cols {
                out[dst[e] as usize * cols + j] += coef[e * heads + j / width] * x[src[e] as usize * cols + j];
            }
        }
        out
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-4 * (1.0 + x.abs().max(y.abs())))
    }

    #[test]
    fn matches_a_plain_loop_and_is_identical_for_every_thread_count() {
        // A hub (row 0) with 3,000 in-edges straddles several blocks; rows 5.. have none.
        let (rows_in, rows_out, layout) = (40, 9, Layout { heads: 2, cols: 8 });
        let mut src = Vec::new();
        let mut dst = Vec::new();
        for e in 0..3_600u32 {
            src.push((e * 7 + 3) % rows_in as u32);
            dst.push(if e < 3_000 { 0 } else { 1 + e % 4 });
        }
        let x: Vec<f32> = (0..rows_in * layout.cols).map(|i| ((i * 37) % 11) as f32 / 7.0 - 0.5).collect();
        let coef: Vec<f32> = (0..src.len() * layout.heads).map(|i| ((i * 13) % 5) as f32 / 5.0).collect();
        let plan = EdgePlan::new(rows_in, rows_out, &src, &dst);
        let one = aggregate(&plan.by_dst, &x, &coef, layout, 1);
        assert!(close(&one, &naive(&src, &dst, rows_out, &x, &coef, layout)));
        for threads in [2, 3, 8] {
            assert_eq!(aggregate(&plan.by_dst, &x, &coef, layout, threads), one, "{threads} threads");
        }
        // The transpose writes sources from destinations.
        let g: Vec<f32> = (0..rows_out * layout.cols).map(|i| (i % 5) as f32 - 2.0).collect();
        let back = aggregate(&plan.by_src, &g, &coef, layout, 3);
        assert!(close(&back, &naive(&dst, &src, rows_in, &g, &coef, layout)));

        let dots = coef_grad(&plan.by_dst, &g, &x, layout, 4);
        assert_eq!(dots, coef_grad(&plan.by_dst, &g, &x, layout, 1));
        for e in [0usize, 1_234, 3_599] {
            for h in 0..2 {
                let expect: f32 =
                    (h * 4..h * 4 + 4).map(|j| g[dst[e] as usize * 8 + j] * x[src[e] as usize * 8 + j]).sum();
                assert!((dots[e * 2 + h] - expect).abs() < 1e-5);
            }
        }
    }
}
