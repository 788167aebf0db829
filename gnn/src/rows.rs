//! Filling a row-major buffer row by row on every core: each row's values depend only on the
//! row's index (dropout masks draw from the row's own stream), so the result is the same on
//! any number of threads, and the host's share of a training step shrinks with the cores.

/// Rows below this many values in all run on the calling thread: spawning costs more.
const PARALLEL_FROM: usize = 1 << 16;

/// Calls `fill(row, values)` for every row of `buffer` (`width` values each), on up to one
/// thread per core.
pub fn for_each_row(buffer: &mut [f32], width: usize, fill: impl Fn(usize, &mut [f32]) + Sync) {
    if width == 0 {
        return;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads == 1 || buffer.len() < PARALLEL_FROM {
        buffer.chunks_mut(width).enumerate().for_each(|(row, values)| fill(row, values));
        return;
    }
    let rows = buffer.len() / width;
    let per_thread = rows.div_ceil(threads);
    std::thread::scope(|scope| {
        for (part, chunk) in buffer.chunks_mut(per_thread * width).enumerate() {
            let fill = &fill;
            scope.spawn(move || {
                for (i, values) in chunk.chunks_mut(width).enumerate() {
                    fill(part * per_thread + i, values);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_filled_once_with_its_own_index() {
        for rows in [0, 1, 7, 70_000] {
            let mut buffer = vec![-1.0; rows * 3];
            for_each_row(&mut buffer, 3, |row, values| values.iter_mut().for_each(|v| *v += row as f32 + 1.0));
            let expected: Vec<f32> = (0..rows).flat_map(|r| [r as f32; 3]).collect();
            assert_eq!(buffer, expected, "{rows} rows");
        }
    }
}
