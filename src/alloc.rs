//! The process's allocator: glibc's (the system allocator) with policies for the large buffers
//! every stage is made of.
//!
//! **Thresholds.** glibc serves a block above its mmap threshold with a fresh mapping and unmaps
//! it when freed, and trims the heap's free top above its trim threshold. Both thresholds start
//! low (128 kB) and only grow after such a block is freed, so whether a stage's tens-of-megabytes
//! batches (a Cora training batch holds 29 MB of features) are paged in and zeroed anew on every
//! step depends on the order of the first frees: the same Cora job took 9.5 s or 17 s from run to
//! run (BENCHMARKS.md). Fixing the thresholds at 64 and 128 MB makes such buffers reuse heap
//! memory every time; blocks larger than that are still mapped and returned to the system.
//!
//! **Arenas** (full-graph training). Worker threads allocate in glibc's per-thread arenas, each
//! a chain of 64 MB heaps. An arena unmaps a heap that empties unless the heap before it has
//! `M_TOP_PAD` bytes free (128 kB by default), so a pass that frees a layer's buffers hands their
//! heaps back and the next pass maps them again and has the kernel zero every page anew: a
//! 3-epoch full-graph job on the 1M graph mapped 165 heaps and spent 20-28% of its samples
//! zeroing pages. A job that trains on the whole graph sets a top pad of [`MAPPED`] bytes, a
//! heap's size ([`keep_arena_heaps`]): each arena keeps its heaps for its next pass (and the
//! main heap keeps that much past its top when it trims), an epoch 20-25% shorter there at the
//! same peak (BENCHMARKS.md, section 23); an arena holds at most what it held at its busiest.
//! Other jobs keep glibc's pad: their steps hold smaller buffers, and with the pad the record
//! trainer's peak on the same graph grew by 8% (1.08 to 1.17 GB) for no time gained.
//!
//! **Huge pages.** The graph's arrays (node store, edges, the owners' runs, the endpoint map,
//! each layer's outputs) are read at random, one cache line per edge: at 10M nodes they span
//! gigabytes, and with 4 kB pages nearly every such read also misses the TLB, a page walk whose
//! own entries no longer fit in the caches. That is a cost per edge that grows with the graph.
//! Every block of at least [`HUGE`] bytes is advised `MADV_HUGEPAGE`, so that Linux backs it
//! with 2 MB pages where it can (transparent huge pages in their default `madvise` mode): 512
//! times fewer pages to map. It is only advice (an error, a kernel without THP, are ignored)
//! and changes no byte a program sees.
//!
//! **Mapped blocks.** A block of at least [`MAPPED`] bytes (Linux) is a mapping of its own,
//! made here rather than by glibc: 2 MB-aligned, a whole number of huge pages, advised as one
//! piece, and grown with `mremap`, which moves its pages instead of copying them. glibc would
//! map such a block too, but advice on part of its mapping (the aligned interior) splits the
//! mapping in two kinds of memory, and `mremap` refuses a range spanning both (`EFAULT`): each
//! doubling of a growing array would copy it into fresh memory, 1.9 GB copied and paged in
//! again in a 4M-node GraphInfer job (BENCHMARKS.md, section 17), on a machine where memory the
//! host has not handed over yet takes about a second a gigabyte to page in. Blocks of [`HUGE`]
//! to [`MAPPED`] bytes live in glibc's heap, advised on their aligned interior; a heap block is
//! never remapped.

use std::alloc::{GlobalAlloc, Layout, System};

/// The smallest block advised to use huge pages: a block spanning at least one aligned 2 MB
/// page. Smaller blocks gain nothing and would split the heap's mapping into pieces.
pub const HUGE: usize = 4 << 20;

/// The smallest block mapped on its own (see the module doc): glibc's mmap threshold as
/// [`keep_batches_in_the_heap`] sets it, so the heap keeps every block it kept before.
pub const MAPPED: usize = 64 << 20;

/// The size of a huge page on x86-64 and aarch64 (with 4 kB base pages).
const PAGE: usize = 2 << 20;

/// The system allocator, advising large blocks to use huge pages and mapping the largest
/// itself (see the module doc).
pub struct HugePages;

/// Whether a block of this layout is a mapping of its own.
fn mapped(layout: Layout) -> bool {
    cfg!(target_os = "linux") && layout.size() >= MAPPED && layout.align() <= PAGE
}

// SAFETY: a block is mapped here exactly when `mapped` holds for its layout, which `dealloc`
// and `realloc` receive unchanged (same size, same alignment), so each block returns to where
// it came from: `System` or `mapping`. Mappings are 2 MB-aligned, so any alignment up to
// `PAGE` holds; `advise` only adds a hint to memory the block owns.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            return mapping::map(layout.size());
        }
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        let block = unsafe { System.alloc(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // A fresh anonymous mapping reads as zeros.
            return mapping::map(layout.size());
        }
        // SAFETY: as `alloc`.
        let block = unsafe { System.alloc_zeroed(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if mapped(layout) {
            // SAFETY: `block` is a mapping of `layout.size()` bytes made by `mapping::map` or
            // `mapping::remap` (see the impl's SAFETY).
            return unsafe { mapping::unmap(block, layout.size()) };
        }
        // SAFETY: `block` came from `System` with this layout (every path above).
        unsafe { System.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees a valid layout of `new_size` with the old alignment.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(layout), mapped(new)) {
            // SAFETY: `block` is a mapping of `layout.size()` bytes (as in `dealloc`).
            (true, true) => unsafe { mapping::remap(block, layout.size(), new_size) },
            (false, false) => {
                // SAFETY: as `dealloc`; the caller's contract for `realloc` is `System::realloc`'s.
                let moved = unsafe { System.realloc(block, layout, new_size) };
                advise(moved, new_size);
                moved
            }
            // Across `MAPPED`, the block changes owner: a new block, the contents copied.
            _ => {
                // SAFETY: `new` is a valid non-zero layout; both blocks are live for the copy.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
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

/// Blocks of [`MAPPED`] bytes or more as mappings of their own: `size` bytes take
/// `span(size)`, a whole number of huge pages, at a 2 MB-aligned address. A failure is a null
/// block, as `GlobalAlloc` asks.
#[cfg(target_os = "linux")]
mod mapping {
    use super::PAGE;
    use libc::{MAP_ANONYMOUS, MAP_FAILED, MAP_NORESERVE, MAP_PRIVATE, PROT_NONE, PROT_READ, PROT_WRITE, c_void};

    fn span(size: usize) -> usize {
        size.next_multiple_of(PAGE)
    }

    /// Reserves `span` bytes of address space at a 2 MB boundary, with `protection`: maps a
    /// huge page more than asked and unmaps the ends around the aligned part.
    fn reserve(span: usize, protection: i32, flags: i32) -> Option<usize> {
        // SAFETY: a new private anonymous mapping touches no memory of the program; the two
        // unmapped ends lie inside it, outside the part returned.
        unsafe {
            let raw =
                libc::mmap(std::ptr::null_mut(), span + PAGE, protection, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
            if raw == MAP_FAILED {
                return None;
            }
            let (raw, start) = (raw as usize, (raw as usize).next_multiple_of(PAGE));
            if start > raw {
                libc::munmap(raw as *mut c_void, start - raw);
            }
            libc::munmap((start + span) as *mut c_void, raw + PAGE - start);
            Some(start)
        }
    }

    /// Advises a whole mapping: aligned and a whole number of huge pages, its interior is all
    /// of it.
    fn advise(start: usize, span: usize) {
        super::advise(start as *mut u8, span);
    }

    pub fn map(size: usize) -> *mut u8 {
        let span = span(size);
        let Some(start) = reserve(span, PROT_READ | PROT_WRITE, 0) else { return std::ptr::null_mut() };
        advise(start, span);
        start as *mut u8
    }

    /// # Safety
    /// `block` is a mapping of `size` bytes made by [`map`] or [`remap`], not used after.
    pub unsafe fn unmap(block: *mut u8, size: usize) {
        // SAFETY: the caller's contract: the whole span is this block's mapping.
        unsafe { libc::munmap(block as *mut c_void, span(size)) };
    }

    /// Resizes a mapping: shrinks it in place, or grows it in place or by moving its pages
    /// (never copying them) to a 2 MB-aligned range reserved for it.
    ///
    /// # Safety
    /// As [`unmap`]; on success `block` is not used after (it may have moved), on failure (a
    /// null block) it is unchanged.
    pub unsafe fn remap(block: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        let (old, new) = (span(size), span(new_size));
        let at = block as usize;
        // SAFETY: [at, at + old) is this block's mapping (the caller's contract); the range
        // past it is given up (shrinking) or taken only where free (growing in place); a
        // move goes to a range reserved here, which MREMAP_FIXED replaces.
        unsafe {
            if new <= old {
                if new < old {
                    libc::munmap((at + new) as *mut c_void, old - new);
                }
                return block;
            }
            if libc::mremap(block as *mut c_void, old, new, 0) != MAP_FAILED {
                advise(at, new);
                return block;
            }
            let Some(to) = reserve(new, PROT_NONE, MAP_NORESERVE) else { return std::ptr::null_mut() };
            let moved = libc::mremap(block as *mut c_void, old, new, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, to);
            if moved == MAP_FAILED {
                libc::munmap(to as *mut c_void, new);
                return std::ptr::null_mut();
            }
            advise(to, new);
            to as *mut u8
        }
    }
}

/// Elsewhere no layout is mapped here ([`mapped`] is false), and these are never called.
#[cfg(not(target_os = "linux"))]
mod mapping {
    pub fn map(_: usize) -> *mut u8 {
        unreachable!("blocks are mapped here on Linux only")
    }
    pub unsafe fn unmap(_: *mut u8, _: usize) {
        unreachable!("blocks are mapped here on Linux only")
    }
    pub unsafe fn remap(_: *mut u8, _: usize, _: usize) -> *mut u8 {
        unreachable!("blocks are mapped here on Linux only")
    }
}

/// Sets the thresholds (glibc on Linux; elsewhere the allocator's defaults stay).
pub fn keep_batches_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED as i32);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}

/// Keeps the arenas' heaps from one pass to the next: a top pad of [`MAPPED`] bytes (see the
/// module doc; glibc on Linux, elsewhere nothing).
pub fn keep_arena_heaps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter, under the main arena's lock.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, MAPPED as i32);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The range and `VmFlags` of the mapping holding `address`, from /proc/self/smaps.
    fn mapping_at(address: usize) -> (usize, usize, Vec<String>) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
        let mut inside = None;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((from, to)) = range
                && let (Ok(from), Ok(to)) = (usize::from_str_radix(from, 16), usize::from_str_radix(to, 16))
            {
                inside = (from..to).contains(&address).then_some((from, to));
            } else if let Some((from, to)) = inside
                && let Some(flags) = line.strip_prefix("VmFlags:")
            {
                return (from, to, flags.split_whitespace().map(String::from).collect());
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    fn flags_at(address: usize) -> Vec<String> {
        mapping_at(address).2
    }

    /// The share of the `len` bytes at `address` that are mapped and in memory (`mincore`;
    /// an unmapped range has none).
    fn resident(address: usize, len: usize) -> f64 {
        let page = 4096;
        let start = address / page * page;
        let pages = (address + len - start).div_ceil(page);
        let mut flags = vec![0u8; pages];
        // SAFETY: mincore reads no byte of the range; it fails (ENOMEM) where nothing is mapped.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, pages * page, flags.as_mut_ptr()) };
        if rc != 0 {
            return 0.0;
        }
        flags.iter().filter(|&&f| f & 1 == 1).count() as f64 / pages as f64
    }

    /// A thread's arena keeps a heap that emptied, mapped and in memory, for its next pass: a
    /// worker's next buffers reuse those pages instead of new ones the kernel zeroes. Without
    /// the top pad the second block's heap below is unmapped when the block is freed.
    #[cfg(target_env = "gnu")]
    #[test]
    fn an_arena_keeps_an_emptied_heap_mapped() {
        keep_batches_in_the_heap();
        keep_arena_heaps();
        let share = std::thread::spawn(|| {
            let size = 40 << 20;
            // The arena's first heap, then a second: 40 MB do not fit twice in one 64 MB heap.
            // Written through `black_box`, so that the pages are touched.
            let first = std::hint::black_box(vec![1u8; size]);
            let second = std::hint::black_box(vec![2u8; size]);
            let at = second.as_ptr() as usize;
            drop(second);
            let share = resident(at, size);
            drop(first);
            share
        })
        .join()
        .unwrap();
        assert!(share > 0.9, "{:.0}% of the freed block is mapped and in memory", share * 100.0);
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

    /// A block of `MAPPED` bytes or more is one mapping, 2 MB-aligned, advised as a whole
    /// (the piece `mremap` needs), and stays so as it grows, shrinks and crosses `MAPPED`,
    /// keeping its contents.
    #[test]
    fn mapped_blocks_stay_one_advised_mapping_as_they_grow() {
        let mb = |n: usize| n << 20;
        let whole = |block: *mut u8, size: usize| {
            let (from, to, flags) = mapping_at(block as usize);
            assert_eq!(block as usize % PAGE, 0, "2 MB-aligned");
            let end = block as usize + size.next_multiple_of(PAGE);
            assert!(from <= block as usize && end <= to, "one mapping holds the block: {from:#x}..{to:#x}");
            if thp_available() {
                assert!(flags.contains(&"hg".into()), "advised from its first byte: {flags:?}");
            }
        };
        // SAFETY: every block is used within its size and freed with the layout it has.
        unsafe {
            let layout = |size| Layout::from_size_align(size, 8).unwrap();
            let mut size = mb(1);
            let mut block = HugePages.alloc(layout(size));
            block.write(7);
            block.add(size - 1).write(0xa5);
            for next in [mb(70), mb(150), mb(151), mb(400), mb(90), mb(2)] {
                block = HugePages.realloc(block, layout(size), next);
                assert!(!block.is_null(), "realloc to {next}");
                assert_eq!(block.read(), 7, "the first byte, at {next}");
                if next > size {
                    assert_eq!(block.add(size - 1).read(), 0xa5, "the last byte before growing to {next}");
                }
                if next >= MAPPED {
                    whole(block, next);
                }
                block.add(next - 1).write(0xa5);
                size = next;
            }
            HugePages.dealloc(block, layout(size));

            let zeroed = HugePages.alloc_zeroed(layout(mb(64)));
            whole(zeroed, mb(64));
            assert!(std::slice::from_raw_parts(zeroed, mb(64)).iter().step_by(4096).all(|&b| b == 0));
            HugePages.dealloc(zeroed, layout(mb(64)));
        }
    }
}
