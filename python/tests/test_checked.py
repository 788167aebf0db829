"""CheckedFile: any range reads the file's bytes, and a changed block fails only the reads that
reach it."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from graphflat import ChangedError, Manifest, Part
from graphflat.checked import CheckedFile
from graphflat.manifest import BLOCK_BYTES


def part_of(data: bytes) -> Part:
    blocks = tuple(zlib.crc32(data[i : i + BLOCK_BYTES]) for i in range(0, len(data), BLOCK_BYTES))
    return Part("p.bin", 0, len(data), zlib.crc32(data), blocks)


def test_ranges_read_the_bytes_and_a_changed_block_fails_its_reads_only(tmp_path: Path) -> None:
    rng = random.Random(4)
    data = bytes(rng.getrandbits(8) for _ in range(2 * BLOCK_BYTES + 12345))
    part = part_of(data)
    manifest = Manifest("run", "flatten", 0, len(data), (part,))
    (tmp_path / "p.bin").write_bytes(data)
    fs = pafs.LocalFileSystem()
    with CheckedFile(fs, str(tmp_path / "p.bin"), manifest, part) as f:
        for _ in range(200):
            start = rng.randrange(len(data))
            n = rng.randrange(1, 3 * BLOCK_BYTES)
            f.seek(start)
            assert f.read(n) == data[start : start + n]
        f.seek(-10, 2)
        assert f.read() == data[-10:]
    changed = bytearray(data)
    changed[BLOCK_BYTES + 7] ^= 1
    (tmp_path / "p.bin").write_bytes(bytes(changed))
    with CheckedFile(fs, str(tmp_path / "p.bin"), manifest, part) as f:
        assert f.read(BLOCK_BYTES) == data[:BLOCK_BYTES]
        f.seek(2 * BLOCK_BYTES)
        assert f.read() == data[2 * BLOCK_BYTES :]
        f.seek(BLOCK_BYTES - 1)
        with pytest.raises(ChangedError, match=rf"bytes {BLOCK_BYTES}\.\.{2 * BLOCK_BYTES} have CRC-32"):
            f.read(2)
    (tmp_path / "p.bin").write_bytes(data[:-1])
    with pytest.raises(ChangedError, match=rf"{len(data) - 1} bytes where the manifest of run run says {len(data)}"):
        CheckedFile(fs, str(tmp_path / "p.bin"), manifest, part)
