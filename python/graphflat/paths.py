"""Local paths and ``s3://`` URIs as pyarrow file systems.

An ``s3://`` URI is reached with the AWS environment graphflat itself reads: credentials,
``AWS_REGION``, and ``AWS_ENDPOINT`` (or ``AWS_ENDPOINT_URL``) for an S3-compatible server.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pyarrow.fs as pafs


def filesystem_and_path(path: str, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """The file system ``path`` lies on, and the path within it (without a trailing ``/``)."""
    if filesystem is not None:
        return filesystem, path.rstrip("/")
    if path.startswith("s3://"):
        url = urlparse(path)
        endpoint = os.environ.get("AWS_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
        options: dict = {"region": os.environ.get("AWS_REGION", "us-east-1")}
        if endpoint:
            parsed = urlparse(endpoint)
            options["endpoint_override"] = parsed.netloc or endpoint
            options["scheme"] = parsed.scheme or "https"
        return pafs.S3FileSystem(**options), f"{url.netloc}{url.path}".rstrip("/")
    if path.startswith("file://"):
        path = urlparse(path).path
    return pafs.LocalFileSystem(), os.path.abspath(path)


def join(directory: str, name: str) -> str:
    """``name`` inside ``directory``, on any pyarrow file system."""
    return f"{directory}/{name}"
