//! The allocator's thresholds for batch-sized buffers.
//!
//! glibc serves a block above its mmap threshold with a fresh mapping and unmaps it when freed,
//! and trims the heap's free top above its trim threshold. Both thresholds start low (128 kB)
//! and only grow after such a block is freed, so whether a stage's tens-of-megabytes batches
//! (a Cora training batch holds 29 MB of features) are paged in and zeroed anew on every step
//! depends on the order of the first frees: the same Cora job took 9.5 s or 17 s from run to
//! run (BENCHMARKS.md). Fixing the thresholds at 64 and 128 MB makes such buffers reuse heap
//! memory every time; blocks larger than that are still mapped and returned to the system.

/// Sets the thresholds (glibc on Linux; elsewhere the allocator's defaults stay).
pub fn keep_batches_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}
