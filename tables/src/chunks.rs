//! Column chunks of local files, read into buffers that a table's readers keep for their next
//! row group.
//!
//! The Parquet reader fetches a row group's column chunks whole and decodes pages out of them:
//! megabytes each (30 MB a node row group of the scale benchmark's graphs). Read through
//! `object_store`, every chunk is a fresh allocation on one of tokio's blocking threads, freed
//! by the worker that decoded it. glibc gives such blocks back to the system when their thread's
//! heap empties, so each row group paged in and zeroed fresh memory: at 10M nodes on 2 workers
//! that was 1,668 of the map step's 10,990 profile samples (BENCHMARKS.md, section 17), more per
//! edge than at 1M, since a long job's freed memory has gone back to the host before it is
//! needed again. Read here, a chunk lands in a buffer of its table's [`ChunkBuffers`] on the
//! reading thread, and its buffer returns there when the last [`Bytes`] over it is dropped: the
//! same pages serve every row group.
//!
//! **Bound.** A buffer is made only when none is kept, and a kept buffer too small for a chunk is
//! given up for the new one: a pool never holds more buffers than its table's readers had live at
//! once, each at most the largest chunk read. It lives as long as the table's open files (a stage
//! drops them when it has read the table).

use std::fs::File;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

/// The buffers of one opened table's column chunks, kept between row groups (see the module
/// doc).
#[derive(Debug, Default)]
pub struct ChunkBuffers {
    kept: Mutex<Vec<Vec<u8>>>,
}

impl ChunkBuffers {
    /// A buffer for `len` bytes: the smallest kept one that holds them, else a new one, for
    /// which the largest kept buffer is given up. A buffer's length is the part of it ever
    /// written (initialized); its capacity may be more.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = (0..kept.len()).filter(|&i| kept[i].capacity() >= len).min_by_key(|&i| kept[i].capacity());
        if let Some(i) = fits {
            return kept.swap_remove(i);
        }
        if let Some(largest) = (0..kept.len()).max_by_key(|&i| kept[i].capacity()) {
            kept.swap_remove(largest);
        }
        Vec::with_capacity(len)
    }

    fn give(&self, buffer: Vec<u8>) {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).push(buffer);
    }

    /// The buffers kept and their bytes (for tests and logs).
    pub fn kept(&self) -> (usize, usize) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        (kept.len(), kept.iter().map(Vec::capacity).sum())
    }
}

/// One chunk's bytes: the first `len` bytes of a buffer that goes back to its pool when dropped.
struct Chunk {
    buffer: Vec<u8>,
    len: usize,
    pool: Arc<ChunkBuffers>,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buffer));
    }
}

/// Reads bytes `range` of `file` into a buffer of `pool`. A file that ends before the range
/// does is an error: its manifest (the size a footer is read by) or its footer named bytes it
/// does not hold.
pub fn read_range(file: &File, range: Range<u64>, pool: &Arc<ChunkBuffers>) -> std::io::Result<Bytes> {
    let len = usize::try_from(range.end.saturating_sub(range.start))
        .map_err(|_| std::io::Error::other("a byte range larger than this machine's address space"))?;
    let mut buffer = pool.take(len);
    if buffer.len() < len {
        // Only the part never written before is zeroed: the pages a first read would touch.
        buffer.resize(len, 0);
    }
    fill(file, &mut buffer[..len], range.start)?;
    Ok(Bytes::from_owner(Chunk { buffer, len, pool: pool.clone() }))
}

#[cfg(unix)]
fn fill(file: &File, mut into: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let end = offset + into.len() as u64;
    while !into.is_empty() {
        match file.read_at(into, offset) {
            // `read_at` reads nothing only at or past the end of the file.
            Ok(0) => {
                let holds = file.metadata().map_or_else(|_| format!("at most {offset}"), |m| m.len().to_string());
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the file holds {holds} bytes, but its manifest or footer names bytes up to {end}"),
                ));
            }
            Ok(n) => {
                into = &mut into[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn fill(file: &File, into: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile_dir::Dir, File) {
        let dir = tempfile_dir::Dir::new();
        let path = dir.0.join("f");
        File::create(&path).and_then(|mut f| f.write_all(bytes)).expect("write");
        let file = File::open(&path).expect("open");
        (dir, file)
    }

    /// A directory removed when dropped (the crate has no tempfile dependency).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = std::env::temp_dir().join(format!("tables-chunks-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("temp dir");
                Dir(dir)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn chunks_read_the_range_and_return_their_buffer_when_the_last_view_drops() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, file) = file_of(&data);
        let pool = Arc::new(ChunkBuffers::default());
        let a = read_range(&file, 100..4_100, &pool).expect("read");
        assert_eq!(&a[..], &data[100..4_100]);
        let view = a.slice(10..20);
        drop(a);
        assert_eq!(pool.kept().0, 0, "a slice still holds the buffer");
        assert_eq!(&view[..], &data[110..120]);
        drop(view);
        assert_eq!(pool.kept(), (1, 4_000));
        // A smaller chunk reuses the kept buffer and sees only its own bytes, not the old tail.
        let b = read_range(&file, 9_000..9_500, &pool).expect("read");
        assert_eq!(&b[..], &data[9_000..9_500]);
        assert_eq!(pool.kept().0, 0);
    }

    #[test]
    fn a_pool_holds_no_more_buffers_than_were_live_at_once() {
        let data = vec![7u8; 50_000];
        let (_dir, file) = file_of(&data);
        let pool = Arc::new(ChunkBuffers::default());
        for round in 0..20u64 {
            // Three chunks live at once, of sizes that change from round to round.
            let sizes = [1_000 + round * 500, 20_000 - round * 300, 5_000];
            let live: Vec<Bytes> = sizes.iter().map(|&n| read_range(&file, 0..n, &pool).expect("read")).collect();
            for (chunk, &n) in live.iter().zip(&sizes) {
                assert_eq!(chunk.len() as u64, n);
                assert!(chunk.iter().all(|&b| b == 7));
            }
            drop(live);
            let (buffers, bytes) = pool.kept();
            assert_eq!(buffers, 3, "round {round}");
            assert!(bytes <= 3 * 20_000, "round {round}: {bytes} bytes kept");
        }
    }

    #[test]
    fn a_range_past_the_end_of_the_file_is_an_error() {
        let (_dir, file) = file_of(&[1, 2, 3]);
        let pool = Arc::new(ChunkBuffers::default());
        let error = read_range(&file, 1..10, &pool).expect_err("past the end");
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(
            error.to_string().contains("holds 3 bytes, but its manifest or footer names bytes up to 10"),
            "{error}"
        );
        // A range that starts past the end (a file cut short after its manifest was written).
        let error = read_range(&file, 7..9, &pool).expect_err("past the end");
        assert!(error.to_string().contains("holds 3 bytes, but its manifest or footer names bytes up to 9"), "{error}");
    }
}
