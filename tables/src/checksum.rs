//! CRC-32 of a part's bytes, whole and per block of [`BLOCK_BYTES`], computed as a run writes
//! them; and the check a reader makes of every block it reads against the manifest.
//!
//! **Why blocks.** No reader of this project reads a part whole in one pass: a worker reads its
//! share of the row groups, a stage only the columns it needs. A CRC of the whole file could be
//! checked only by reading the file a second time. So the manifest also keeps a CRC per block
//! (HDFS keeps one per 512 bytes for the same reason), a reader widens every byte range it reads
//! to whole blocks ([`widen`]) and checks each block as it arrives ([`Expected::check`]): every
//! byte a reader decodes has been checked, with no second pass. Reading a row group's columns,
//! whose chunks lie side by side, costs at most two blocks more.
//!
//! **Size.** 256 kB blocks: the manifest takes 4 bytes a block (a 256 MB part, 1,024 blocks,
//! 5.5 kB in base64), and a widened read at most 512 kB more. The whole file's CRC-32 stays in
//! the manifest for readers that read a part whole (pyarrow's, through the Python package).

use std::ops::Range;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes per checked block (the last block of a file may be shorter).
pub const BLOCK_BYTES: u64 = 256 << 10;

/// The CRC-32 of every byte passed to [`Checksums::update`], whole and per block.
#[derive(Debug, Clone, Default)]
pub struct Checksums {
    file: crc32fast::Hasher,
    block: crc32fast::Hasher,
    in_block: u64,
    blocks: Vec<u32>,
    bytes: u64,
}

impl Checksums {
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        while !bytes.is_empty() {
            let n = bytes.len().min((BLOCK_BYTES - self.in_block) as usize);
            self.block.update(&bytes[..n]);
            self.in_block += n as u64;
            bytes = &bytes[n..];
            if self.in_block == BLOCK_BYTES {
                self.close_block();
            }
        }
    }

    /// The file's CRC is its blocks' combined: one pass over the bytes.
    fn close_block(&mut self) {
        let block = std::mem::take(&mut self.block);
        self.file.combine(&block);
        self.blocks.push(block.finalize());
        self.in_block = 0;
    }

    /// The bytes passed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn finish(mut self) -> Sums {
        if self.in_block > 0 {
            self.close_block();
        }
        Sums { bytes: self.bytes, crc32: self.file.finalize(), blocks: Blocks(self.blocks) }
    }
}

/// What a part's bytes check against: their count, CRC-32 and the CRC-32 of each block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sums {
    pub bytes: u64,
    pub crc32: u32,
    pub blocks: Blocks,
}

impl Sums {
    pub fn of(bytes: &[u8]) -> Sums {
        let mut sums = Checksums::default();
        sums.update(bytes);
        sums.finish()
    }
}

/// The CRC-32 of each [`BLOCK_BYTES`] block of a file, in order; in a manifest, the base64 of
/// their little-endian bytes (a quarter of the size of JSON numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Blocks(pub Vec<u32>);

impl Blocks {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Blocks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        let bytes: Vec<u8> = self.0.iter().flat_map(|c| c.to_le_bytes()).collect();
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use base64::Engine;
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)?;
        if !bytes.len().is_multiple_of(4) {
            return Err(serde::de::Error::custom("block checksums of a length that is not a multiple of 4 bytes"));
        }
        Ok(Blocks(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()))
    }
}

/// `range` of a file of `size` bytes widened to whole blocks.
pub fn widen(range: &Range<u64>, size: u64) -> Range<u64> {
    let start = range.start / BLOCK_BYTES * BLOCK_BYTES;
    let end = range.end.div_ceil(BLOCK_BYTES).saturating_mul(BLOCK_BYTES).min(size);
    start..end.max(start)
}

/// A block whose bytes do not have the CRC its manifest gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub block: usize,
    pub bytes: Range<u64>,
    pub expected: u32,
    pub found: u32,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "bytes {}..{} have CRC-32 {:08x} where the manifest says {:08x}",
            self.bytes.start, self.bytes.end, self.found, self.expected
        )
    }
}

/// A part's checksums as its manifest lists them, for a reader to check blocks against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub size: u64,
    pub blocks: Blocks,
}

impl Expected {
    /// Whether the manifest has block checksums (an earlier version's has none).
    pub fn checks(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// Checks `bytes`, read from `start` (a block boundary) to a block boundary or the file's
    /// end, block by block.
    pub fn check(&self, start: u64, bytes: &[u8]) -> Result<(), Mismatch> {
        debug_assert_eq!(start % BLOCK_BYTES, 0, "reads are widened to whole blocks");
        for (i, block) in bytes.chunks(BLOCK_BYTES as usize).enumerate() {
            let index = (start / BLOCK_BYTES) as usize + i;
            let found = crc32fast::hash(block);
            let at = start + i as u64 * BLOCK_BYTES;
            let expected = self.blocks.0.get(index).copied();
            if expected != Some(found) {
                let bytes = at..at + block.len() as u64;
                return Err(Mismatch { block: index, bytes, expected: expected.unwrap_or(0), found });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + i / 7919) as u8).collect()
    }

    /// The blocks and the whole-file CRC of bytes fed in pieces that straddle blocks equal those
    /// computed directly, for lengths around the block size.
    #[test]
    fn sums_in_pieces_equal_sums_at_once() {
        let b = BLOCK_BYTES as usize;
        for n in [0, 1, b - 1, b, b + 1, 3 * b + 17] {
            let data = bytes(n);
            let mut sums = Checksums::default();
            data.chunks(100_003).for_each(|piece| sums.update(piece));
            let sums = sums.finish();
            assert_eq!(sums.crc32, crc32fast::hash(&data), "{n} bytes");
            let direct: Vec<u32> = data.chunks(b).map(crc32fast::hash).collect();
            assert_eq!(sums.blocks.0, direct, "{n} bytes");
            assert_eq!(sums.bytes, n as u64);
        }
    }

    #[test]
    fn blocks_round_trip_through_json() {
        let blocks = Blocks(vec![0, 1, u32::MAX, 0xdead_beef]);
        let json = serde_json::to_string(&blocks).unwrap();
        assert_eq!(serde_json::from_str::<Blocks>(&json).unwrap(), blocks);
        assert!(serde_json::from_str::<Blocks>("\"AAE=\"").is_err(), "3 bytes are not a whole checksum");
    }

    /// A widened read checks; one flipped byte anywhere in it is found, in its block, with both
    /// values.
    #[test]
    fn every_block_of_a_widened_read_is_checked() {
        let b = BLOCK_BYTES;
        let data = bytes((3 * b + 100) as usize);
        let expected = Expected { size: data.len() as u64, blocks: Sums::of(&data).blocks };
        for range in [0..1, b - 1..b + 1, b + 5..2 * b, 3 * b + 99..3 * b + 100, 10..3 * b + 50] {
            let wide = widen(&range, expected.size);
            assert!(wide.start <= range.start && range.end <= wide.end, "{range:?} -> {wide:?}");
            assert_eq!(wide.start % b, 0);
            assert!(wide.end.is_multiple_of(b) || wide.end == expected.size);
            let read = &data[wide.start as usize..wide.end as usize];
            assert_eq!(expected.check(wide.start, read), Ok(()));
            let mut flipped = read.to_vec();
            let at = (range.start - wide.start) as usize;
            flipped[at] ^= 0x10;
            let mismatch = expected.check(wide.start, &flipped).unwrap_err();
            assert_eq!(mismatch.block as u64, range.start / b);
            assert_eq!(mismatch.expected, expected.blocks.0[mismatch.block]);
            assert_eq!(
                mismatch.found,
                crc32fast::hash(
                    &flipped[(mismatch.bytes.start - wide.start) as usize..]
                        [..(mismatch.bytes.end - mismatch.bytes.start) as usize]
                )
            );
            assert_ne!(mismatch.found, mismatch.expected);
        }
    }
}
