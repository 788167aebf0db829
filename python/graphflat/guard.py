"""The rule every writer of an output directory follows before it writes anything, in the
words of graphflat's own (``tables/src/guard.rs``; ``tests/guard.rs`` in the repository holds
the two to the same words, case by case):

1. a directory that holds a committed output of another kind (another stage's, or another
   command's) is never replaced, with or without ``overwrite``;
2. a directory inside a committed output, or one that holds a committed output in a folder of
   its own, is never written: the new files would be read with the other output's rows;
3. an output of the same kind is replaced only with ``overwrite``.

Before those, a directory named as one graphflat keeps beside an output
(``.<output>.graphflat-<what>``: a switch's version, a refresh's digests, a kept graph) is never
written.

Each refusal is a :class:`CommittedError` (a ``FileExistsError``), as graphflat's is exit 73.
"""

from __future__ import annotations

import os
import posixpath

import pyarrow.fs as pafs

from graphflat.manifest import MANIFEST, SUCCESS, Manifest, read_manifest
from graphflat.paths import filesystem_and_path, join
from graphflat.switch import is_version_name


class CommittedError(FileExistsError):
    """The output holds (or lies in, or beside) a committed output that this commit may not
    replace or write into."""


#: What kind of output each stage or command writes, in the words of every refusal.
KINDS: dict[str, str] = {
    "flatten": "a record set (written by [flatten])",
    "train": "a model (written by [train] or save_model)",
    "infer": "scores (written by [infer])",
    "generate": "a generated graph table (written by generate)",
    "import": "an imported graph table (written by import)",
    "split-edges": "a split edge table (written by split-edges)",
    "partition": "a partition table (written by [partition])",
}

ELSEWHERE = "choose another output directory"
REPLACE = (
    "to replace it, set overwrite = true in the job file (--overwrite on the command line, overwrite=True in Python)"
)


def kind(stage: str) -> str:
    """The words for an output of ``stage``."""
    return KINDS.get(stage, f"an output of {stage}")


#: The one asking, as the job file or the command line names it.
ASKERS: dict[str, str] = {
    "flatten": "[flatten]",
    "train": "[train]",
    "infer": "[infer]",
    "partition": "[partition]",
    "generate": "generate",
    "import": "import",
    "split-edges": "split-edges",
}


def _asker(stage: str) -> str:
    """'[train]' or 'generate': the one asking (see :data:`ASKERS`)."""
    return ASKERS.get(stage, stage)


def _held(fs: pafs.FileSystem, root: str) -> tuple[str, Manifest | str | None]:
    """What the directory ``root`` holds: ``("nothing", None)``, ``("output", manifest)``,
    ``("foreign", None)`` (a ``_SUCCESS`` alone) or ``("unreadable", error text)``."""
    infos = fs.get_file_info([join(root, MANIFEST), join(root, SUCCESS)])
    if all(info.type == pafs.FileType.NotFound for info in infos):
        return "nothing", None
    try:
        manifest = read_manifest(root, fs)
    except (ValueError, OSError, KeyError) as error:
        return "unreadable", str(error)
    return ("output", manifest) if manifest is not None else ("foreign", None)


def _committed_here(fs: pafs.FileSystem, root: str) -> str | None:
    what, value = _held(fs, root)
    if what == "nothing":
        return None
    if what == "output":
        return f"{kind(value.stage)} (run {value.run})"
    if what == "foreign":
        return "a committed output this project did not write (its _SUCCESS)"
    return f"a committed output whose manifest does not read ({value})"


def _shown(path: str, root: str) -> str:
    """How a place is named: an ``s3://`` URI as given, a local path absolute."""
    return f"s3://{root}" if path.startswith("s3://") else root


def is_kept_beside(name: str) -> bool:
    """Whether ``name`` is one graphflat keeps for itself beside an output named ``<output>``:
    ``.<output>.graphflat-<what>`` (a refresh's digests, a kept graph, a switch's version)."""
    output, infix, what = name.rpartition(".graphflat-")
    return bool(infix) and output.startswith(".") and len(output) > 1 and bool(what)


def guard(path: str, asked: str, overwrite: bool, filesystem: pafs.FileSystem | None = None) -> None:
    """Raises :class:`CommittedError` unless ``asked`` (a stage or command: ``"train"`` for
    :func:`graphflat.pyg.save_model`) may write the output directory ``path`` (see the module
    doc); ``overwrite`` allows replacing an output of the same kind."""
    fs, root = filesystem_and_path(path, filesystem)
    shown = _shown(path, root)
    # On a local disk, where the output really lies: a symlink may lead into another output.
    above = os.path.realpath(root) if isinstance(fs, pafs.LocalFileSystem) else root
    name = posixpath.basename(above)
    if is_kept_beside(name) and not is_version_name(name):
        raise CommittedError(
            f"{shown} is named as a place graphflat keeps for itself beside an output "
            f"(`.<output>.graphflat-<what>`: a refresh's digests, a kept graph), which that output's stages "
            f"replace; {_asker(asked)} is never written there: {ELSEWHERE}"
        )
    if isinstance(fs, pafs.LocalFileSystem) and is_version_name(posixpath.basename(above)):
        raise CommittedError(
            f"{shown} is named as a version graphflat keeps beside an output while it switches or while a reader "
            f"reads it, which the next command over that output removes; {_asker(asked)} is never written there: "
            f"{ELSEWHERE}"
        )
    while (parent := posixpath.dirname(above)) and parent != above:
        above = parent
        what = _committed_here(fs, above)
        if what is not None:
            raise CommittedError(
                f"{shown} lies inside {_shown(path, above)}, which holds {what}; {_asker(asked)} is never "
                f"written into another output: {ELSEWHERE}"
            )
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    folders = sorted(
        posixpath.basename(i.path)
        for i in infos
        if i.type == pafs.FileType.Directory and not posixpath.basename(i.path).startswith(("_", "."))
    )
    for folder in folders:
        inside = join(root, folder)
        what = _committed_here(fs, inside)
        if what is not None:
            raise CommittedError(
                f"{shown} holds {_shown(path, inside)}, which is {what}; {_asker(asked)} is never written "
                f"beside another output: {ELSEWHERE}"
            )
    what, value = _held(fs, root)
    if what == "nothing":
        return
    if what == "output":
        if value.stage == asked and overwrite:
            return
        if value.stage == asked:
            raise CommittedError(f"{shown} already holds {kind(value.stage)} (run {value.run}); {REPLACE}, or {ELSEWHERE}")
        raise CommittedError(
            f"{shown} holds {kind(value.stage)} (run {value.run}), and {asked} asked to write {kind(asked)}; an "
            f"output of another kind is never replaced, with or without overwrite: {ELSEWHERE}"
        )
    if what == "foreign":
        raise CommittedError(
            f"{shown} holds a committed output that this project did not write (a _SUCCESS without {MANIFEST}); "
            f"it is never replaced, with or without overwrite: {ELSEWHERE}"
        )
    if not overwrite:
        raise CommittedError(f"{shown} holds a committed output whose manifest does not read ({value}); {REPLACE}, or {ELSEWHERE}")
