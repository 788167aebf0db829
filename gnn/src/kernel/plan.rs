//! A layer's edges laid out for the edge-partitioned kernel: sorted by destination (the forward
//! pass writes destination rows) and by source (the backward pass writes source rows), each cut
//! into blocks of equal edge counts.
//!
//! Blocks depend only on the edges, never on the thread count, and a row that straddles blocks
//! is summed block by block in block order: the kernel's output is bit-identical however many
//! threads run it.

use std::any::Any;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

/// Edges per block, at least; more when a layer has many edges, so a batch has at most
/// [`MAX_BLOCKS`] blocks to schedule.
pub const MIN_BLOCK_EDGES: usize = 512;
pub const MAX_BLOCKS: usize = 256;

/// Edges grouped by the row they write: row `r`'s edges are positions `ptr[r]..ptr[r + 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    /// `rows + 1` offsets into `edge` / `other`.
    pub ptr: Vec<usize>,
    /// The edge (its index in the layer's edge list, which indexes the coefficients).
    pub edge: Vec<u32>,
    /// The edge's other end: the row it reads.
    pub other: Vec<u32>,
    /// Contiguous ranges of positions, of about equal length.
    pub blocks: Vec<Range<usize>>,
}

impl Csr {
    /// Groups edges `(write, read)` by `write`, stable in edge order.
    fn build(rows: usize, write: &[u32], read: &[u32]) -> Csr {
        let mut ptr = vec![0usize; rows + 1];
        for &w in write {
            ptr[w as usize + 1] += 1;
        }
        for r in 0..rows {
            ptr[r + 1] += ptr[r];
        }
        let mut next = ptr.clone();
        let (mut edge, mut other) = (vec![0u32; write.len()], vec![0u32; write.len()]);
        for (e, (&w, &r)) in write.iter().zip(read).enumerate() {
            let p = &mut next[w as usize];
            edge[*p] = e as u32;
            other[*p] = r;
            *p += 1;
        }
        let len = write.len();
        let size = MIN_BLOCK_EDGES.max(len.div_ceil(MAX_BLOCKS));
        let blocks = (0..len.div_ceil(size)).map(|b| b * size..((b + 1) * size).min(len)).collect();
        Csr { ptr, edge, other, blocks }
    }

    pub fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    pub fn edges(&self) -> usize {
        self.edge.len()
    }

    /// The row whose edges include position `p` (`p < edges`).
    pub fn row_of(&self, p: usize) -> usize {
        // The last row starting at or before p; rows without edges start where the next one does.
        self.ptr.partition_point(|&start| start <= p) - 1
    }
}

/// One layer's edges in both orders.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgePlan {
    /// Rows the layer reads.
    pub rows_in: usize,
    /// Rows the layer writes.
    pub rows_out: usize,
    /// By destination: the forward pass.
    pub by_dst: Csr,
    /// By source: the backward pass (gradient of the input).
    pub by_src: Csr,
    /// Threads the kernel runs this plan on (the output does not depend on it).
    pub threads: usize,
    /// The plan's arrays on a device, for a kernel that runs there (the GPU's, made on first
    /// use and kept as long as the plan).
    pub device: DeviceCache,
}

/// A plan's copy on a device: set once, never part of what the plan is (equal plans compare
/// equal whatever their copies; a clone starts without one).
#[derive(Default)]
pub struct DeviceCache(OnceLock<Arc<dyn Any + Send + Sync>>);

impl Deref for DeviceCache {
    type Target = OnceLock<Arc<dyn Any + Send + Sync>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Clone for DeviceCache {
    fn clone(&self) -> Self {
        DeviceCache::default()
    }
}

impl PartialEq for DeviceCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for DeviceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "DeviceCache(set)" } else { "DeviceCache(empty)" })
    }
}

/// Plans are shared between the forward pass and the backward nodes autodiff keeps.
pub type PlanRef = Arc<EdgePlan>;

impl EdgePlan {
    /// `src[e] < rows_in` and `dst[e] < rows_out` for every edge `e` (checked: the batch builder
    /// guarantees it, and a violation is a bug, not bad input).
    pub fn new(rows_in: usize, rows_out: usize, src: &[u32], dst: &[u32]) -> EdgePlan {
        assert_eq!(src.len(), dst.len(), "edge endpoints differ in length");
        assert!(src.iter().all(|&s| (s as usize) < rows_in), "an edge reads past rows_in");
        assert!(dst.iter().all(|&d| (d as usize) < rows_out), "an edge writes past rows_out");
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        EdgePlan {
            rows_in,
            rows_out,
            by_dst: Csr::build(rows_out, dst, src),
            by_src: Csr::build(rows_in, src, dst),
            threads,
            device: DeviceCache::default(),
        }
    }

    /// The same plan run on `threads` threads (0: one per core). A process running several
    /// workers gives each its share of the cores.
    pub fn with_threads(mut self, threads: usize) -> EdgePlan {
        if threads > 0 {
            self.threads = threads;
        }
        self
    }

    pub fn edges(&self) -> usize {
        self.by_dst.edges()
    }

    /// The grouping a pass uses: forward writes destinations, `transpose` writes sources.
    pub fn csr(&self, transpose: bool) -> &Csr {
        if transpose { &self.by_src } else { &self.by_dst }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_edges_by_row_stably_and_blocks_cover_every_position() {
        let src = [3, 0, 3, 1, 2];
        let dst = [1, 0, 1, 1, 2];
        let plan = EdgePlan::new(4, 3, &src, &dst);
        assert_eq!(plan.by_dst.ptr, vec![0, 1, 4, 5]);
        assert_eq!(plan.by_dst.edge, vec![1, 0, 2, 3, 4]);
        assert_eq!(plan.by_dst.other, vec![0, 3, 3, 1, 2]);
        assert_eq!(plan.by_src.ptr, vec![0, 1, 2, 3, 5]);
        assert_eq!(plan.by_src.other, vec![0, 1, 2, 1, 1]);
        assert_eq!(plan.by_dst.blocks, vec![0..5]);
        assert_eq!([0, 1, 3, 4].map(|p| plan.by_dst.row_of(p)), [0, 1, 1, 2]);

        // Rows without edges between rows with edges: row_of skips them.
        let plan = EdgePlan::new(1, 5, &[0, 0], &[1, 4]);
        assert_eq!(plan.by_dst.ptr, vec![0, 0, 1, 1, 1, 2]);
        assert_eq!([0, 1].map(|p| plan.by_dst.row_of(p)), [1, 4]);

        let many: Vec<u32> = (0..10_000).map(|i| i % 7).collect();
        let plan = EdgePlan::new(7, 7, &many, &many);
        let blocks = &plan.by_dst.blocks;
        assert_eq!(blocks.len(), 10_000usize.div_ceil(MIN_BLOCK_EDGES));
        assert!(blocks.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!((blocks[0].start, blocks.last().unwrap().end), (0, 10_000));
    }

    #[test]
    fn no_edges() {
        let plan = EdgePlan::new(3, 2, &[], &[]);
        assert_eq!(plan.by_dst.ptr, vec![0, 0, 0]);
        assert!(plan.by_dst.blocks.is_empty() && plan.by_src.blocks.is_empty());
    }
}
