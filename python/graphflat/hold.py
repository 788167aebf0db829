"""A reader's hold on the version of a local output it opened, as graphflat's own readers take
one (``tables::pin``).

graphflat replaces a local output in one step: the new version is built beside it and the two
directories are exchanged. A reader that opened the output before holds the directory open with
a shared ``flock`` and reads through ``/proc/self/fd/<fd>/``, which leads to the version it
opened wherever the exchange moved it; the replaced version stays (hidden, beside the output)
while any reader holds it, and the next graphflat command that opens the output removes it once
none does. Nothing is held on S3, on a file system that is not pyarrow's local one, or where
``/proc`` is missing: a reader there whose output is replaced gets :class:`ChangedError`, and
reads again.
"""

from __future__ import annotations

import fcntl
import os
import time

import pyarrow.fs as pafs

_TRIES = 50  # opens of a directory that a switch moved between the open and the lock


class Hold:
    """The version of the output ``root`` on ``fs`` that this reader reads.

    :attr:`reading` is where to read it (``root`` itself where nothing is held), :attr:`root`
    the path messages name. The hold ends with :meth:`close` (or ``with``), or when the object
    is collected.
    """

    def __init__(self, fs: pafs.FileSystem, root: str) -> None:
        self.root = root
        self.reading = root
        self._fd: int | None = None
        if isinstance(fs, pafs.LocalFileSystem) and os.path.isdir("/proc/self/fd") and os.path.isdir(root):
            self._take(root)

    def _take(self, root: str) -> None:
        for _ in range(_TRIES):
            try:
                fd = try_lock(root, exclusive=False)
            except OSError:
                return
            if fd is None:  # being removed: the path leads elsewhere by now
                time.sleep(0.002)
                continue
            opened, there = os.fstat(fd), _stat(root)
            if there is not None and (opened.st_dev, opened.st_ino) == (there.st_dev, there.st_ino):
                self._fd, self.reading = fd, f"/proc/self/fd/{fd}"
                return
            os.close(fd)

    @property
    def held(self) -> bool:
        """Whether a version is held (reads go through :attr:`reading`)."""
        return self._fd is not None

    def shown(self, path: str) -> str:
        """``path`` under :attr:`reading` as a message names it: under :attr:`root`."""
        if self._fd is not None and path.startswith(self.reading):
            return self.root + path[len(self.reading) :]
        return path

    def close(self) -> None:
        """Lets the version go."""
        if self._fd is not None:
            fd, self._fd, self.reading = self._fd, None, self.root
            os.close(fd)

    def __getstate__(self) -> dict:
        # A process that unpickles a hold (a DataLoader worker started by spawn) takes its own
        # on the version there now: a replaced one's parts are then missing there, and its
        # reads raise ChangedError rather than mix two versions.
        return {"root": self.root, "held": self._fd is not None}

    def __setstate__(self, state: dict) -> None:
        self.root = self.reading = state["root"]
        self._fd = None
        if state["held"]:
            self._take(self.root)

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def try_lock(path: str, exclusive: bool) -> int | None:
    """The directory ``path`` opened, with a shared or exclusive ``flock`` taken without
    waiting; ``None`` where another's lock stands in the way. Raises ``OSError`` where the
    directory cannot be opened (``FileNotFoundError`` where it is gone)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None
