//! A worker's share of the learned table in a checkpoint (`[train] checkpoint_every` with
//! `learned_embedding_dim`): its rows, their optimizer state, the step count and the kept best
//! rows, as one object per worker and epoch beside the worker's checkpoint
//! (`checkpoints/checkpoint-<run>-<worker>-rows-<epoch>.bin`). It is streamed out and read back
//! in blocks (`tables::streamed`), so no second copy of the shard is held, and it appears whole
//! or not at all. Resuming needs the workers that wrote it (as the weights' checkpoints do), so
//! each worker reads back its own shard: nothing moves between workers.
//!
//! The worker's JSON checkpoint names the object, and is written after it: a crash between the
//! two leaves the previous checkpoint and its own object in place.
//!
//! Layout, little-endian: `GFROWS01`, then eight u64 (the row width `dim`, the optimizer's
//! values a row in `first` (`dim` for Adam, 1 for Adagrad), the rows, the steps, the values a
//! row in `second` (`dim` for Adam, 0), the kept best rows (0: none kept), the rows with an
//! original string (0 for integer ids), the strings' bytes), then the ids (i64), the values,
//! `first`, `second` and the best rows (f32), the strings' ends (u64) and their bytes.

use std::ops::Range;

use tables::streamed::{StreamedPut, read_range};
use tables::{Io, Place};

use super::shard::RowShard;
use crate::error::Error;

const MAGIC: &[u8; 8] = b"GFROWS01";
const HEADER: u64 = 8 + 8 * 8;
/// Values converted and written, or read, at a time.
const BLOCK: usize = 1 << 20;

/// The object's name in the checkpoints directory.
pub fn name(run: &str, worker: usize, epoch: usize) -> String {
    format!("checkpoint-{run}-{worker:05}-rows-{epoch}.bin")
}

/// Writes `shard` to `place` (see the module doc).
pub fn save(io: &Io, place: Place, shard: &RowShard) -> Result<(), Error> {
    let mut put = StreamedPut::new(io, place);
    let best = shard.best.as_ref().map_or(0, |b| b.len() / shard.dim.max(1));
    let strings = if shard.has_keys() { shard.ids.len() } else { 0 };
    let header = [shard.dim, shard.state_width(), shard.ids.len(), shard.steps as usize, shard.second_width()];
    let mut head = MAGIC.to_vec();
    for n in header.into_iter().chain([best, strings, shard.keys.len()]) {
        head.extend_from_slice(&(n as u64).to_le_bytes());
    }
    put.write(&head)?;
    write_blocks(&mut put, &shard.ids, i64::to_le_bytes)?;
    for values in [&shard.values, &shard.first, &shard.second] {
        write_blocks(&mut put, values, f32::to_le_bytes)?;
    }
    write_blocks(&mut put, shard.best.as_deref().unwrap_or_default(), f32::to_le_bytes)?;
    write_blocks(&mut put, &shard.key_ends[..strings], |end| (end as u64).to_le_bytes())?;
    put.write(shard.keys.as_bytes())?;
    Ok(put.finish()?)
}

fn write_blocks<T: Copy, const N: usize>(
    put: &mut StreamedPut,
    values: &[T],
    bytes: impl Fn(T) -> [u8; N],
) -> Result<(), Error> {
    for block in values.chunks(BLOCK) {
        put.write(&block.iter().flat_map(|&v| bytes(v)).collect::<Vec<u8>>())?;
    }
    Ok(())
}

/// Reads the shard at `place` into `shard` (a fresh one of the job's config), checking that it
/// fits the job's row width and optimizer and holds as many bytes as its header says.
pub fn load(io: &Io, place: &Place, shard: &mut RowShard) -> Result<(), Error> {
    let unfit = |why: String| Error::Resume(format!("{}: {why}", place.shown()));
    let size = io.block_on(place.size())?.ok_or_else(|| unfit("missing (its checkpoint names it)".into()))?;
    let head = read_range(io, place, 0..HEADER.min(size))?;
    if head.len() < HEADER as usize || &head[..8] != MAGIC {
        return Err(unfit("not a learned-rows checkpoint this version reads".into()));
    }
    let n: Vec<usize> =
        head[8..].chunks(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize).collect();
    let [dim, state, rows, steps, second, best, strings, key_bytes] = n[..] else { unreachable!("eight numbers") };
    let second_width = shard.second_width();
    if (dim, state, second) != (shard.dim, shard.state_width(), second_width) || !(strings == 0 || strings == rows) {
        return Err(unfit(format!(
            "rows of {dim} with {state} + {second} optimizer values each: this job's are {} with {} + {second_width} \
             (resume with the learned_embedding_dim and optimizer it was written with)",
            shard.dim,
            shard.state_width()
        )));
    }
    let counts =
        [rows * 8, rows * dim * 4, rows * state * 4, rows * second * 4, best * dim * 4, strings * 8, key_bytes];
    if HEADER + counts.iter().sum::<usize>() as u64 != size {
        return Err(unfit(format!(
            "{size} bytes, not the {} its header gives",
            HEADER + counts.iter().sum::<usize>() as u64
        )));
    }
    let mut at = HEADER;
    let mut section = |bytes: usize| {
        let range = at..at + bytes as u64;
        at = range.end;
        range
    };
    shard.ids = read_values(io, place, section(counts[0]), i64::from_le_bytes)?;
    shard.values = read_values(io, place, section(counts[1]), f32::from_le_bytes)?;
    shard.first = read_values(io, place, section(counts[2]), f32::from_le_bytes)?;
    shard.second = read_values(io, place, section(counts[3]), f32::from_le_bytes)?;
    let kept = read_values(io, place, section(counts[4]), f32::from_le_bytes)?;
    shard.best = (best > 0).then_some(kept);
    shard.key_ends = read_values(io, place, section(counts[5]), |b| u64::from_le_bytes(b) as usize)?;
    let keys = read_range(io, place, section(counts[6]))?;
    shard.keys = String::from_utf8(keys).map_err(|_| unfit("its strings are not UTF-8".into()))?;
    shard.steps = steps as u64;
    shard.reindex();
    Ok(())
}

/// The values of `range` of the object, `N` bytes each, read a block at a time.
fn read_values<T, const N: usize>(
    io: &Io,
    place: &Place,
    range: Range<u64>,
    value: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, Error> {
    let mut out = Vec::with_capacity((range.end - range.start) as usize / N);
    let mut at = range.start;
    while at < range.end {
        let end = (at + (BLOCK * N) as u64).min(range.end);
        let bytes = read_range(io, place, at..end)?;
        out.extend(bytes.chunks_exact(N).map(|b| value(b.try_into().expect("N bytes"))));
        at = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::StorageConfig;
    use schemas::job::{LearnedConfig, SparseOptimizerKind};

    /// A shard written and read back is the same shard: the same rows, moments, steps, kept
    /// best rows and strings, and it steps on as the original does. A shard of another width or
    /// optimizer, or a cut object, is refused with its name.
    #[test]
    fn a_saved_shard_reads_back_and_steps_on_as_the_original() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("learned-checkpoint-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let place = |name: &str| io.output(dir.join(name).to_str().unwrap()).unwrap();
        for optimizer in [SparseOptimizerKind::Adam, SparseOptimizerKind::Adagrad] {
            let config = LearnedConfig { dim: 4, optimizer, lr: None, init_std: 1.0, weight_decay: 0.01 };
            let keys: Vec<String> = ["a", "bé", "c"].map(String::from).to_vec();
            let mut shard = RowShard::new(&config, 3);
            shard.rows(&[7, -2, 9], &keys);
            shard.step(&[7, 9], &[0.5; 8], 0.1);
            shard.keep_best();
            shard.rows(&[11], &["d".to_owned()]);
            shard.step(&[11, -2], &[-0.25; 8], 0.1);
            save(&io, place("shard"), &shard).unwrap();
            let mut back = RowShard::new(&config, 3);
            load(&io, &place("shard"), &mut back).unwrap();
            assert_eq!(
                (&back.ids, &back.values, &back.first, &back.second),
                (&shard.ids, &shard.values, &shard.first, &shard.second)
            );
            assert_eq!(
                (back.steps, &back.best, &back.keys, &back.key_ends),
                (shard.steps, &shard.best, &shard.keys, &shard.key_ends)
            );
            shard.step(&[9, 11], &[1.0; 8], 0.1);
            back.step(&[9, 11], &[1.0; 8], 0.1);
            assert_eq!(back.rows(&[9, 11, 5], &[]), shard.rows(&[9, 11, 5], &[]), "{optimizer:?}");

            let wider = LearnedConfig { dim: 5, ..config.clone() };
            let error = load(&io, &place("shard"), &mut RowShard::new(&wider, 3)).unwrap_err().to_string();
            assert!(error.contains("shard") && error.contains("rows of 4"), "{error}");
            let bytes = std::fs::read(dir.join("shard")).unwrap();
            std::fs::write(dir.join("cut"), &bytes[..bytes.len() - 3]).unwrap();
            let error = load(&io, &place("cut"), &mut RowShard::new(&config, 3)).unwrap_err().to_string();
            assert!(error.contains("not the"), "{error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
