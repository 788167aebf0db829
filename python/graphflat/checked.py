"""A committed part opened for random access, every byte read checked against its manifest.

Parquet readers read a file in ranges (the footer, then column chunks), never whole. This file
widens each read to whole blocks of :data:`~graphflat.manifest.BLOCK_BYTES` and checks each
block's CRC-32 against the manifest's as it arrives, as graphflat's own readers do: one pass
over the bytes read, none over the rest. The last span read is kept, so the many small reads of
a footer cost one read of its blocks. pyarrow reads through :meth:`CheckedFile.read_buffer`,
which hands it the span's bytes without a copy.
"""

from __future__ import annotations

import io
import os
import stat
import zlib

import pyarrow as pa
import pyarrow.fs as pafs

from graphflat.manifest import BLOCK_BYTES, Manifest, Part


class ChangedError(ValueError):
    """A part is not what its manifest lists (its size, CRC-32 or rows): it changed after the
    commit, or another run replaced the output while it was read."""


def refuse_special(fs: pafs.FileSystem, where: str, run: str, shown: str | None = None) -> None:
    """Raises :class:`ChangedError` when a local FIFO, socket or device lies where run ``run``'s
    manifest lists a part: opening or reading one would block, or never end. ``shown`` names
    ``where`` in the message (a held version's path, see :mod:`graphflat.hold`)."""
    if isinstance(fs, pafs.LocalFileSystem) and os.path.exists(where) and not stat.S_ISREG(os.stat(where).st_mode):
        raise ChangedError(f"{shown or where}: not a regular file where the manifest of run {run} lists a part")


class CheckedFile(io.RawIOBase):
    """The part ``part`` of the output committed by ``manifest``, at ``where`` on ``fs``
    (named ``shown`` in messages where that differs: a held version's path).

    A read-only, seekable binary file (``pyarrow.parquet.ParquetFile`` takes it) that raises
    :class:`ChangedError` naming the part, the bytes and both CRCs when a block differs.
    """

    def __init__(self, fs: pafs.FileSystem, where: str, manifest: Manifest, part: Part, shown: str | None = None) -> None:
        super().__init__()
        refuse_special(fs, where, manifest.run, shown)
        self._file = fs.open_input_file(where)
        self._where, self._run, self._part = shown or where, manifest.run, part
        size = self._file.size()
        if size != part.bytes:
            self._file.close()
            raise ChangedError(
                f"{self._where}: {size} bytes where the manifest of run {manifest.run} says {part.bytes}: "
                "the part changed after its commit"
            )
        self._pos = 0
        self._span = (0, b"")  # (start, bytes) of the last blocks read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._part.bytes}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._pos + len(view), self._part.bytes)
        if end <= self._pos:
            return 0
        start, data = self._blocks(self._pos, end)
        n = end - self._pos
        view[:n] = memoryview(data)[self._pos - start : end - start]
        self._pos = end
        return n

    def read_buffer(self, size: int | None = -1) -> pa.Buffer:
        """``read(size)`` as a pyarrow buffer over the checked span's bytes, not a copy of them:
        pyarrow's readers call this in place of ``read`` when a file has it."""
        end = self._part.bytes if size is None or size < 0 else min(self._pos + size, self._part.bytes)
        if end <= self._pos:
            return pa.py_buffer(b"")
        start, data = self._blocks(self._pos, end)
        buffer = pa.py_buffer(memoryview(data)[self._pos - start : end - start])
        self._pos = end
        return buffer

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()

    def _blocks(self, start: int, end: int) -> tuple[int, bytes]:
        """Bytes ``[start, end)`` widened to whole blocks, each checked: (their start, bytes)."""
        cached_start, cached = self._span
        if cached_start <= start and end <= cached_start + len(cached):
            return self._span
        first = start // BLOCK_BYTES * BLOCK_BYTES
        last = min(-(-end // BLOCK_BYTES) * BLOCK_BYTES, self._part.bytes)
        data = self._file.read_at(last - first, first)
        if self._part.blocks:
            view = memoryview(data)
            for offset in range(0, len(data), BLOCK_BYTES):
                self._check(first + offset, view[offset : offset + BLOCK_BYTES])
        self._span = (first, data)
        return self._span

    def _check(self, at: int, block: memoryview) -> None:
        index = at // BLOCK_BYTES
        crc = zlib.crc32(block)
        expected = self._part.blocks[index] if index < len(self._part.blocks) else None
        if crc != expected:
            raise ChangedError(
                f"{self._where}: bytes {at}..{at + len(block)} have CRC-32 {crc:08x} where the manifest of run "
                f"{self._run} says {expected if expected is None else format(expected, '08x')}: "
                "the part changed after its commit"
            )
