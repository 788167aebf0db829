"""Copies a committed model directory with model-<run>.json's sampler set to "all" (every
in-edge), and re-commits it: every other listed part (the weights, a learned model's
`embeddings/` parts) is hard-linked (copied across file systems), and the manifest in
`_manifest.parquet`'s footer (format 2, key `graphflat.manifest`) gets the JSON's new size,
CRC-32 and block CRC-32s, as the trainer's commit writes them; then an empty `_SUCCESS`.
GraphInfer then runs the same weights over every in-edge.

    python bench/all_edges_model.py MODEL_DIR OUT_DIR

Needs pyarrow (the manifest is a Parquet footer).
"""

import base64
import json
import os
import shutil
import sys
import zlib

import pyarrow.parquet as pq

KEY = b"graphflat.manifest"


def blocks_and_crc(body, block):
    crcs = [zlib.crc32(body[i : i + block]) for i in range(0, len(body), block)]
    return base64.b64encode(b"".join(c.to_bytes(4, "little") for c in crcs)).decode(), zlib.crc32(body)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    manifest_file = os.path.join(src, "_manifest.parquet")
    schema = pq.read_schema(manifest_file)
    manifest = json.loads(schema.metadata[KEY])
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    parts = []
    for part in manifest["parts"]:
        name = part["name"]
        os.makedirs(os.path.dirname(os.path.join(dst, name)), exist_ok=True)
        if os.path.basename(name).startswith("model-") and name.endswith(".json"):
            with open(os.path.join(src, name), "rb") as f:
                meta = json.loads(f.read())
            meta["sampler"], meta["fanouts"] = "all", []
            body = json.dumps(meta, indent=2).encode()
            with open(os.path.join(dst, name), "wb") as f:
                f.write(body)
            blocks, crc = blocks_and_crc(body, manifest["block_bytes"])
            part = dict(part, bytes=len(body), crc32=crc, blocks=blocks)
        else:
            try:
                os.link(os.path.join(src, name), os.path.join(dst, name))
            except OSError:
                shutil.copy(os.path.join(src, name), os.path.join(dst, name))
        parts.append(part)
    manifest.update(parts=parts, bytes=sum(p["bytes"] for p in parts))
    empty = schema.empty_table()
    empty = empty.replace_schema_metadata({**(schema.metadata or {}), KEY: json.dumps(manifest).encode()})
    pq.write_table(empty, os.path.join(dst, "_manifest.parquet"))
    open(os.path.join(dst, "_SUCCESS"), "w").close()


if __name__ == "__main__":
    main()
