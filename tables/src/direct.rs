//! A local part file written with direct I/O: bytes go from this process's buffers to the disk
//! without a copy into the page cache.
//!
//! **Why.** A write through the page cache copies every byte into a page the kernel allocates
//! for it. On a virtual machine whose host takes back the guest's free memory, each such page is
//! also faulted in from the host: writing the 2.3 GB of the 1M-node flatten cost 4.9 s of CPU in
//! the kernel's copy alone, 14.5% of the job (BENCHMARKS.md, section 1), and a plain `dd` of 2
//! GB took 5.7 s of system time through the page cache against 1.3 s direct. A stage's output is
//! written once and read by a later job, usually larger than memory: caching it buys little and
//! evicts what other programs read.
//!
//! **How.** Bytes gather in an aligned chunk of [`CHUNK`] bytes. A full chunk goes to the part's
//! flusher thread, which writes it at its offset while the next one fills: two chunks take
//! turns, so the writer waits for the disk only when it outruns it. The last, partial chunk is
//! written without `O_DIRECT`, whose lengths and offsets must be multiples of the block size. A
//! file system that refuses `O_DIRECT` (some FUSE and network mounts) gets the same bytes through
//! the page cache. Direct I/O is Linux's; elsewhere every part is written through the page cache.
//!
//! **Visibility.** The part is written under its staged name (`_temporary/<run>/….staged`, see
//! [`crate::names::staged_name`]), which no directory reader takes for data; the run's commit
//! renames it into place ([`crate::staging`]). A part dropped before [`DirectPart::complete`]
//! removes its file; a killed run's is left to the next commit's cleanup.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::checksum::{Checksums, Sums};

/// The alignment `O_DIRECT` asks of buffers, offsets and lengths: the largest logical block
/// size of common devices (512 bytes or 4 kB).
const ALIGN: usize = 4096;

/// Bytes per write: large enough that a write costs about its transfer, a multiple of
/// [`ALIGN`].
pub const CHUNK: usize = 8 << 20;

/// A buffer of [`CHUNK`] bytes starting at an [`ALIGN`]ed address, and how many it holds.
struct Chunk {
    memory: Vec<u8>,
    /// Where the aligned part of `memory` starts.
    start: usize,
    len: usize,
}

impl Chunk {
    fn new() -> Chunk {
        let memory = vec![0u8; CHUNK + ALIGN];
        let start = memory.as_ptr().align_offset(ALIGN);
        Chunk { memory, start, len: 0 }
    }

    fn filled(&self) -> &[u8] {
        &self.memory[self.start..self.start + self.len]
    }

    /// Copies as much of `bytes` as fits; returns how much.
    fn fill(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(CHUNK - self.len);
        let at = self.start + self.len;
        self.memory[at..at + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        n
    }

    fn is_full(&self) -> bool {
        self.len == CHUNK
    }
}

/// The thread that writes full chunks at their offsets and hands each chunk back.
struct Flusher {
    to_disk: Option<SyncSender<(Chunk, u64)>>,
    back: Receiver<Chunk>,
    thread: Option<JoinHandle<io::Result<()>>>,
    /// Chunks made so far (at most two).
    made: usize,
}

impl Flusher {
    fn spawn(file: Arc<File>, direct: bool) -> io::Result<Flusher> {
        let (to_disk, chunks) = sync_channel::<(Chunk, u64)>(1);
        let (give_back, back) = sync_channel(2);
        let thread = std::thread::Builder::new().name("graphflat-direct-write".into()).spawn(move || {
            let mut direct = direct;
            for (chunk, offset) in chunks {
                match file.write_all_at(chunk.filled(), offset) {
                    // The file system took `O_DIRECT` at open but refuses it on writes.
                    Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                        set_direct(&file, false)?;
                        direct = false;
                        file.write_all_at(chunk.filled(), offset)?;
                    }
                    written => written?,
                }
                // The writer has stopped taking chunks back only when it is finishing.
                let _ = give_back.send(Chunk { len: 0, ..chunk });
            }
            Ok(())
        })?;
        Ok(Flusher { to_disk: Some(to_disk), back, thread: Some(thread), made: 1 })
    }

    /// Sends a full chunk to be written at `offset`; returns an empty one to fill next.
    fn swap(&mut self, full: Chunk, offset: u64) -> io::Result<Chunk> {
        let sent = self.to_disk.as_ref().is_some_and(|to_disk| to_disk.send((full, offset)).is_ok());
        if !sent {
            return Err(self.stop());
        }
        if self.made < 2 {
            self.made += 1;
            return Ok(Chunk::new());
        }
        self.back.recv().map_err(|_| self.stop())
    }

    /// Waits for every chunk sent to be written.
    fn finish(&mut self) -> io::Result<()> {
        self.to_disk = None;
        match self.thread.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(io::Error::other("the direct-write thread panicked")),
        }
    }

    /// The error that stopped the thread.
    fn stop(&mut self) -> io::Error {
        match self.finish() {
            Err(e) => e,
            Ok(()) => io::Error::other("the direct-write thread ended early"),
        }
    }
}

/// One part being written (see the module doc): an [`io::Write`] that keeps the checksums of its
/// bytes for the manifest.
pub struct DirectPart {
    staging: PathBuf,
    file: Arc<File>,
    direct: bool,
    current: Chunk,
    /// Where `current` goes in the file.
    offset: u64,
    flusher: Flusher,
    sums: Checksums,
    completed: bool,
    /// A chunk failed to go to disk: every later write, and completing, fail too.
    broken: bool,
}

impl DirectPart {
    /// Starts a part at its staged path `staging` (its directory made if missing); a file
    /// already there is never written over.
    pub fn create(staging: PathBuf) -> io::Result<DirectPart> {
        DirectPart::create_with(staging, true)
    }

    /// [`DirectPart::create`], trying `O_DIRECT` only where `try_direct` says so.
    /// Its folder is made again where another run's commit moved it meanwhile
    /// ([`crate::moved::again_if_moved`]).
    fn create_with(staging: PathBuf, try_direct: bool) -> io::Result<DirectPart> {
        let file = crate::moved::again_if_moved(|| {
            if let Some(dir) = staging.parent() {
                std::fs::create_dir_all(dir)?;
            }
            OpenOptions::new().write(true).create_new(true).open(&staging)
        })?;
        DirectPart::start(staging, file, try_direct)
    }

    /// Writes the part through `file`, its staged file `staging`.
    fn start(staging: PathBuf, file: File, try_direct: bool) -> io::Result<DirectPart> {
        let direct = try_direct && set_direct(&file, true).is_ok();
        let file = Arc::new(file);
        let flusher = Flusher::spawn(file.clone(), direct).inspect_err(|_| {
            let _ = std::fs::remove_file(&staging);
        })?;
        Ok(DirectPart {
            staging,
            file,
            direct,
            current: Chunk::new(),
            offset: 0,
            flusher,
            sums: Checksums::default(),
            completed: false,
            broken: false,
        })
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.offset + self.current.len as u64
    }

    /// Writes what is left; returns the checksums of the part's bytes. The file stays at its
    /// staged path for the commit.
    pub fn complete(mut self) -> io::Result<Sums> {
        if self.broken {
            return Err(broken());
        }
        self.flusher.finish()?;
        if self.current.len > 0 {
            if self.direct {
                set_direct(&self.file, false)?;
            }
            self.file.write_all_at(self.current.filled(), self.offset)?;
        }
        self.completed = true;
        Ok(std::mem::take(&mut self.sums).finish())
    }
}

impl Write for DirectPart {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // After a failed hand-over `current` is an empty placeholder; the part is lost.
        if self.broken {
            return Err(broken());
        }
        let n = self.current.fill(bytes);
        self.sums.update(&bytes[..n]);
        if self.current.is_full() {
            let full = std::mem::replace(&mut self.current, Chunk { memory: Vec::new(), start: 0, len: 0 });
            self.broken = true;
            self.current = self.flusher.swap(full, self.offset)?;
            self.broken = false;
            self.offset += CHUNK as u64;
        }
        Ok(n)
    }

    /// Nothing: durability is the file system's (as for `object_store`'s local files), and a
    /// partial chunk cannot be written direct.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for DirectPart {
    fn drop(&mut self) {
        if !self.completed {
            let _ = self.flusher.finish();
            let _ = std::fs::remove_file(&self.staging);
        }
    }
}

fn broken() -> io::Error {
    io::Error::other("an earlier write of this part failed")
}

/// Turns `O_DIRECT` on or off for `file`; an error where the file system refuses it.
#[cfg(target_os = "linux")]
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this process owns, reading and setting its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on { flags | libc::O_DIRECT } else { flags & !libc::O_DIRECT };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_direct(_: &File, on: bool) -> io::Result<()> {
    if on { Err(io::Error::from(io::ErrorKind::Unsupported)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("graphflat-direct-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// Bytes no two chunks share, so a chunk written at the wrong offset shows.
    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4093) as u8).collect()
    }

    /// Every length around the chunk and block sizes, written in pieces that straddle chunks,
    /// reads back whole at its staged path, with the checksums of its bytes.
    #[test]
    fn a_completed_part_holds_every_byte() {
        let dir = scratch("lengths");
        for try_direct in [true, false] {
            for n in [0, 1, ALIGN - 1, ALIGN + 1, CHUNK, CHUNK + 1, 2 * CHUNK + ALIGN + 3] {
                let target = dir.join(format!("part-{n}-{try_direct}.parquet.staged"));
                let data = bytes(n);
                let mut part = DirectPart::create_with(target.clone(), try_direct).unwrap();
                data.chunks(1_000_003).for_each(|piece| part.write_all(piece).unwrap());
                assert_eq!(part.bytes_written(), n as u64);
                let sums = part.complete().unwrap();
                assert!(std::fs::read(&target).unwrap() == data, "{n} bytes, direct {try_direct}");
                assert_eq!(sums, Sums::of(&data));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_part_dropped_before_it_completes_leaves_no_file() {
        let dir = scratch("dropped");
        let target = dir.join("part-x.parquet.staged");
        let mut part = DirectPart::create(target.clone()).unwrap();
        part.write_all(&bytes(CHUNK * 2 + 10)).unwrap();
        drop(part);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the staging file is removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A chunk the disk refuses (here: a file open only for reading) fails the write that
    /// handed it over, every later write and the completion, without a panic (a buffered
    /// writer above flushes once more when it is dropped), and leaves no file.
    #[test]
    fn a_failed_chunk_fails_the_part() {
        let dir = scratch("failed");
        std::fs::create_dir_all(&dir).unwrap();
        let staging = dir.join("part-z.parquet.staged");
        std::fs::write(&staging, b"").unwrap();
        let read_only = File::open(&staging).unwrap();
        let mut part = DirectPart::start(staging, read_only, true).unwrap();
        assert!(part.write_all(&bytes(4 * CHUNK)).is_err(), "the refused chunks fail a write");
        assert!(part.write(&[1, 2, 3]).is_err(), "a broken part takes no more bytes");
        assert!(part.complete().is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "neither the part nor its staging file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Another writer's staging file under the same name is never written over.
    #[test]
    fn a_staging_file_in_place_is_refused() {
        let dir = scratch("taken");
        std::fs::create_dir_all(&dir).unwrap();
        let staging = dir.join("part-y.parquet.staged");
        std::fs::write(&staging, b"someone else's").unwrap();
        let error = DirectPart::create(staging.clone()).err().expect("the name is taken");
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&staging).unwrap(), b"someone else's");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
