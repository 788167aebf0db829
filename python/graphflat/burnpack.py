"""Burn's ``burnpack`` files (``model-<run>.bpk``): named little-endian tensors, read and written
without burn.

The layout (burn-pack 0.22): a 10-byte header (magic ``BURN`` as the u32 ``0x4255524E``, format
version u16 1, metadata size u32), the metadata as CBOR (``tensors``: per name its ``dtype``,
``shape`` and ``data_offsets`` ``[start, end)`` relative to the data section, optionally a
``param_id``; ``metadata``: text pairs), zero padding to a 256-byte boundary, then the data
section, each tensor starting on a 256-byte boundary. Only ``F32`` tensors are read and written
(every parameter of this project's models is one).

The CBOR here is the subset burn writes for that metadata (maps, text, unsigned integers,
arrays); anything else is an error, never a guess.
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = 0x4255524E
VERSION = 1
ALIGN = 256
_HEADER = struct.Struct("<IHI")
#: At most this much metadata is read (burn's own limit is 100 MiB).
MAX_METADATA = 100 << 20


def read(data: bytes, name: str = "weights") -> dict[str, np.ndarray]:
    """The tensors of the burnpack ``data`` by name (``name`` names the file in errors)."""
    if len(data) < _HEADER.size:
        raise ValueError(f"{name}: {len(data)} bytes is too short for a burnpack file")
    magic, version, size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"{name}: not a burnpack file (magic {magic:#x})")
    if version > VERSION:
        raise ValueError(f"{name}: burnpack format {version} is newer than this package reads ({VERSION})")
    if size > min(MAX_METADATA, len(data) - _HEADER.size):
        raise ValueError(f"{name}: metadata of {size} bytes does not fit the file")
    metadata, end = _decode(memoryview(data), _HEADER.size)
    if end != _HEADER.size + size or not isinstance(metadata, dict):
        raise ValueError(f"{name}: its metadata is not one CBOR map of {size} bytes")
    start = _aligned(_HEADER.size + size)
    tensors = {}
    for key, d in metadata.get("tensors", {}).items():
        if d.get("dtype") != "F32":
            raise ValueError(f"{name}: tensor {key} is {d.get('dtype')}, where every parameter is F32")
        shape = tuple(int(s) for s in d["shape"])
        lo, hi = (int(v) for v in d["data_offsets"])
        if hi - lo != 4 * int(np.prod(shape, dtype=np.int64)) or start + hi > len(data) or lo > hi:
            raise ValueError(f"{name}: tensor {key} of shape {list(shape)} does not fit bytes {lo}..{hi}")
        tensors[key] = np.frombuffer(data, "<f4", count=(hi - lo) // 4, offset=start + lo).reshape(shape).copy()
    return tensors


def write(tensors: dict[str, np.ndarray]) -> bytes:
    """A burnpack file of ``tensors`` (name -> float32 array), in burn's layout."""
    blobs, offsets, at = [], {}, 0
    for key, value in tensors.items():
        raw = np.ascontiguousarray(value, dtype="<f4").tobytes()
        offsets[key] = (at, at + len(raw))
        blobs.append(raw + bytes(_aligned(len(raw)) - len(raw)))
        at += _aligned(len(raw))
    described = {
        key: {"dtype": "F32", "shape": list(np.shape(tensors[key])), "data_offsets": list(offsets[key])}
        for key in sorted(tensors)
    }
    meta = _encode({"tensors": described, "metadata": {"format": "burnpack", "producer": "graphflat-python"}})
    head = _HEADER.pack(MAGIC, VERSION, len(meta)) + meta
    return head + bytes(_aligned(len(head)) - len(head)) + b"".join(blobs)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _decode(buf: memoryview, at: int, depth: int = 0):
    """The CBOR item at ``at`` and where it ends."""
    if depth > 32:
        raise ValueError("CBOR nested too deep")
    major, info = buf[at] >> 5, buf[at] & 31
    at += 1
    if info < 24:
        arg = info
    elif info in (24, 25, 26, 27):
        width = 1 << (info - 24)
        arg = int.from_bytes(buf[at : at + width], "big")
        at += width
    else:
        raise ValueError(f"CBOR item with additional information {info}: not what burn writes")
    if major == 0:
        return arg, at
    if major == 3:
        return bytes(buf[at : at + arg]).decode("utf-8"), at + arg
    if major == 4:
        items = []
        for _ in range(arg):
            item, at = _decode(buf, at, depth + 1)
            items.append(item)
        return items, at
    if major == 5:
        out = {}
        for _ in range(arg):
            key, at = _decode(buf, at, depth + 1)
            out[key], at = _decode(buf, at, depth + 1)
        return out, at
    raise ValueError(f"CBOR major type {major}: not what burn writes")


def _head(major: int, arg: int) -> bytes:
    if arg < 24:
        return bytes([major << 5 | arg])
    for info, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if arg < 1 << (8 * width):
            return bytes([major << 5 | info]) + arg.to_bytes(width, "big")
    raise ValueError(f"{arg} does not fit CBOR's 64 bits")


def _encode(value) -> bytes:
    if isinstance(value, bool) or not isinstance(value, (int, str, list, tuple, dict)):
        raise TypeError(f"no CBOR here for {type(value).__name__}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative integers are not written")
        return _head(0, value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _head(3, len(raw)) + raw
    if isinstance(value, (list, tuple)):
        return _head(4, len(value)) + b"".join(_encode(v) for v in value)
    return _head(5, len(value)) + b"".join(_encode(k) + _encode(v) for k, v in value.items())
