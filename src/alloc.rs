//! The process's allocator: glibc's (the system allocator) with two policies for the large
//! buffers every stage is made of.
//!
//! **Thresholds.** glibc serves a block above its mmap threshold with a fresh mapping and unmaps
//! it when freed, and trims the heap's free top above its trim threshold. Both thresholds start
//! low (128 kB) and only grow after such a block is freed, so whether a stage's tens-of-megabytes
//! batches (a Cora training batch holds 29 MB of features) are paged in and zeroed anew on every
//! step depends on the order of the first frees: the same Cora job took 9.5 s or 17 s from run to
//! run (BENCHMARKS.md). Fixing the thresholds at 64 and 128 MB makes such buffers reuse heap
//! memory every time; blocks larger than that are still mapped and returned to the system.
//!
//! **Huge pages.** The graph's arrays (node store, edges, the owners' runs, the endpoint map,
//! each layer's outputs) are read at random, one cache line per edge: at 10M nodes they span
//! gigabytes, and with 4 kB pages nearly every such read also misses the TLB, a page walk whose
//! own entries no longer fit in the caches. That is a cost per edge that grows with the graph.
//! Every block of at least [`HUGE`] bytes is advised `MADV_HUGEPAGE`, so that Linux backs it
//! with 2 MB pages where it can (transparent huge pages in their default `madvise` mode): 512
//! times fewer pages to map. The advice covers the block's 2 MB-aligned interior; it is only
//! advice (an error, a kernel without THP, are ignored) and changes no byte a program sees.

use std::alloc::{GlobalAlloc, Layout, System};

/// The smallest block advised to use huge pages: a block spanning at least one aligned 2 MB
/// page. Smaller blocks gain nothing and would split the heap's mapping into pieces.
pub const HUGE: usize = 4 << 20;

/// The size of a huge page on x86-64 and aarch64 (with 4 kB base pages).
const PAGE: usize = 2 << 20;

/// The system allocator, advising large blocks to use huge pages (see the module doc).
pub struct HugePages;

// SAFETY: every block comes from and returns to `System` unchanged; `advise` only adds a hint
// to memory the block owns.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        let block = unsafe { System.alloc(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let block = unsafe { System.alloc_zeroed(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from `System` with this layout (every path above).
        unsafe { System.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`; the caller's contract for `realloc` is `System::realloc`'s.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        advise(moved, new_size);
        moved
    }
}

/// Advises the 2 MB-aligned interior of the `size` bytes at `block` to use huge pages, when the
/// block is at least [`HUGE`] bytes (a null block, a smaller one: nothing).
fn advise(block: *mut u8, size: usize) {
    if block.is_null() || size < HUGE {
        return;
    }
    let start = (block as usize).next_multiple_of(PAGE);
    let end = (block as usize + size) / PAGE * PAGE;
    if end <= start {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: [start, end) lies inside the block, which this process owns; madvise with
    // MADV_HUGEPAGE changes how the kernel backs those pages, never their contents.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Sets the thresholds (glibc on Linux; elsewhere the allocator's defaults stay).
pub fn keep_batches_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping holding `address`, from /proc/self/smaps.
    fn flags_at(address: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((from, to)) = range
                && let (Ok(from), Ok(to)) = (usize::from_str_radix(from, 16), usize::from_str_radix(to, 16))
            {
                inside = (from..to).contains(&address);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().map(String::from).collect();
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    fn thp_available() -> bool {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| mode.contains("[madvise]") || mode.contains("[always]"))
    }

    /// A large block, allocated, zeroed or grown into one, is advised huge pages over its
    /// aligned interior (the mapping's `hg` flag); a small one is not.
    #[test]
    fn large_blocks_are_advised_huge_pages() {
        if !thp_available() {
            eprintln!("skipping: this kernel has no transparent huge pages in madvise or always mode");
            return;
        }
        let interior = |block: *mut u8| (block as usize).next_multiple_of(PAGE) + PAGE / 2;
        let large = Layout::from_size_align(16 << 20, 8).unwrap();
        // SAFETY: every block is freed with the layout it has.
        unsafe {
            let block = HugePages.alloc(large);
            assert!(flags_at(interior(block)).contains(&"hg".into()), "alloc");
            HugePages.dealloc(block, large);

            let block = HugePages.alloc_zeroed(large);
            assert!(flags_at(interior(block)).contains(&"hg".into()), "alloc_zeroed");
            assert!(std::slice::from_raw_parts(block, large.size()).iter().all(|&b| b == 0));
            HugePages.dealloc(block, large);

            // Grown past the heap's mmap threshold (64 MB), from a block below [`HUGE`].
            let small = Layout::from_size_align(1 << 20, 8).unwrap();
            let block = HugePages.alloc(small);
            block.write(7);
            let grown = HugePages.realloc(block, small, 80 << 20);
            assert_eq!(grown.read(), 7, "realloc keeps the contents");
            assert!(flags_at(interior(grown)).contains(&"hg".into()), "realloc");
            HugePages.dealloc(grown, Layout::from_size_align(80 << 20, 8).unwrap());
        }
    }
}
