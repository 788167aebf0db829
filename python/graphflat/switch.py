"""The switch on a local file system, as graphflat's own (``tables/src/switch.rs``): the run's
whole version of the output directory is built as a hidden sibling ``.<name>.graphflat-<run>``
(hard links to the files the output keeps, this run's files, the manifest and ``_SUCCESS``),
``_temporary/`` and folders this project did not write are moved into it, and it is exchanged
with the output in one ``renameat2(RENAME_EXCHANGE)`` (three renames where the file system
lacks it), under the lock (``flock``) of the parent directory that graphflat's switches take.
A reader of the directory sees the old version or the new one, whole, at every instant. The
replaced version goes at once unless a reader holds it (:mod:`graphflat.hold`): it is then
renamed ``<sibling>.kept`` and stays until graphflat's next command over the output finds it
free.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable

from graphflat.hold import try_lock
from graphflat.manifest import read_manifest

#: How a version's sibling is named: ``.<name>`` then this, then the run.
INFIX = ".graphflat-"
#: Folders of a model directory that hold run-named files (``gnn::io::LAYOUT``); the second
#: holds a table.
LAYOUT_DIRS = ("checkpoints", "embeddings")
TABLE_DIRS = ("embeddings",)
#: A run's id as graphflat gives one (``tables::names::is_run_id``).
_RUN = re.compile("[0-9a-f]{19}")
#: The suffix of a replaced version a reader holds (graphflat's ``KEPT``).
KEPT = ".kept"
#: How long a switch waits for another's lock (graphflat's ``LOCK_WAIT``).
LOCK_WAIT = 60.0

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


class ParentLock:
    """The exclusive lock of ``root``'s parent directory, held through a switch."""

    def __init__(self, root: str) -> None:
        self.parent = os.path.dirname(root)

    def __enter__(self) -> ParentLock:
        self.fd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY)
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise TimeoutError(
                        f"{self.parent}: another process has held this directory's commit lock for {LOCK_WAIT:.0f} s"
                    ) from None
                time.sleep(0.005)

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)


def can_build(root: str, run: str) -> bool:
    """Whether ``root``'s version can be built beside it: on the same file system (not a
    mount point), under a name the file system takes, in a parent this process may write."""
    parent = os.path.dirname(root)
    same = os.stat(parent).st_dev == os.stat(root).st_dev
    named = len(os.fsencode(os.path.basename(sibling(root, run)))) + len(".aside") <= 255
    return same and named and os.access(parent, os.W_OK | os.X_OK)


def sibling(root: str, run: str) -> str:
    """Where run ``run``'s version of ``root`` is built (and the replaced version lies after)."""
    parent, name = os.path.split(root)
    return os.path.join(parent, f".{name}{INFIX}{run}")


def exchange(a: str, b: str) -> None:
    """``a`` and ``b`` exchanged: in one step where the file system can, else three renames."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if done == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), b)
    aside = a + ".aside"
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _keep_into(root: str, nxt: str, replaced: Callable[[str], bool], folder: str = "") -> None:
    """Links into ``nxt`` every file of ``root`` the new version keeps (see the module doc)."""
    for entry in os.scandir(os.path.join(root, folder)):
        listed = f"{folder}/{entry.name}" if folder else entry.name
        top = not folder
        if top and entry.name in ("_manifest.parquet", "_SUCCESS", "_temporary"):
            continue
        if replaced(listed):
            continue
        if entry.is_dir(follow_symlinks=False):
            # A layout's folder, and any folder inside one (another tool's, kept as it is).
            if not top or entry.name in LAYOUT_DIRS:
                os.mkdir(os.path.join(nxt, listed))
                _keep_into(root, nxt, replaced, listed)
                if top and entry.name in TABLE_DIRS and not os.listdir(os.path.join(nxt, listed)):
                    os.rmdir(os.path.join(nxt, listed))
            continue
        os.link(entry.path, os.path.join(nxt, listed), follow_symlinks=False)


def move_folders(source: str, target: str) -> None:
    """Renames ``_temporary/`` and every folder this project did not write from ``source``
    into ``target``, where ``target`` has none of that name."""
    for entry in os.scandir(source):
        if entry.is_dir(follow_symlinks=False) and entry.name not in LAYOUT_DIRS:
            if not os.path.lexists(os.path.join(target, entry.name)):
                os.rename(entry.path, os.path.join(target, entry.name))


def switch_in(root: str, run: str, files: dict[str, bytes], manifest: bytes, replaced: Callable[[str], bool]) -> None:
    """Builds run ``run``'s version of ``root`` (``files``, the ``_manifest.parquet`` bytes
    ``manifest`` and ``_SUCCESS``, with what ``root`` keeps: all but what ``replaced`` says the
    replaced version wrote) and exchanges it with ``root``; the caller holds the lock. The
    replaced version is left at the sibling's name."""
    nxt = sibling(root, run)
    os.mkdir(nxt)
    try:
        kept = os.stat(root)
        try:
            os.chown(nxt, kept.st_uid, kept.st_gid)
        except PermissionError:
            pass
        os.chmod(nxt, kept.st_mode & 0o7777)
        _keep_into(root, nxt, replaced)
        for name, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(nxt, name)), exist_ok=True)
            with open(os.path.join(nxt, name), "wb") as out:
                out.write(data)
        with open(os.path.join(nxt, "_manifest.parquet"), "wb") as out:
            out.write(manifest)
        open(os.path.join(nxt, "_SUCCESS"), "wb").close()
        move_folders(root, nxt)
        exchange(nxt, root)
    except BaseException:
        if os.path.isdir(nxt) and os.path.isdir(root):
            move_folders(nxt, root)
        shutil.rmtree(nxt, ignore_errors=True)
        raise


def is_version_name(name: str) -> bool:
    """Whether ``name`` is named as a version the switch keeps beside some output
    (``.<output>.graphflat-<run>``, or that with ``.aside`` or ``.kept``): graphflat removes
    such a directory, so no writer writes one (:func:`graphflat.guard.guard`)."""
    output, infix, run = name.rpartition(INFIX)
    run = run.removesuffix(KEPT).removesuffix(".aside")
    return bool(infix) and output.startswith(".") and len(output) > 1 and _RUN.fullmatch(run) is not None


def remove_version(path: str) -> None:
    """Removes the replaced version ``path`` under its exclusive lock, or, while a reader holds
    it, renames it ``.<output>.graphflat-<the run it holds>.kept`` for graphflat's next command
    to remove."""
    try:
        fd = try_lock(path, exclusive=True)
    except FileNotFoundError:
        return
    if fd is None:
        if not path.endswith(KEPT):
            kept = _kept_name(path)
            os.rename(path, kept)
            remove_version(kept)  # the reader may have let go meanwhile
        return
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)


def _kept_name(version: str) -> str:
    """The name a version keeps while a reader holds it (graphflat's ``switch::kept``): named
    after the run whose manifest it holds, or its own name then ``KEPT``."""
    output, infix, _ = version.rpartition(INFIX)
    try:
        manifest = read_manifest(version)
    except (OSError, ValueError):
        manifest = None
    if infix and manifest is not None:
        return f"{output}{INFIX}{manifest.run}{KEPT}"
    return version + KEPT
